import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkDocs, docsContext, formatProblem, type DocsContext } from '../../scripts/docs/check.js';
import { REPO_ROOT } from '../../scripts/docs/references.js';

let ctx: DocsContext;
const scratch: string[] = [];

beforeAll(async () => {
  ctx = await docsContext();
}, 60_000);

afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

describe('the docs (README.md and docs/**/*.md)', () => {
  it('link only to files and headings that exist, and name only real commands, flags, config keys, scripts and files', async () => {
    const problems = (await checkDocs(ctx)).map(formatProblem);
    expect(problems, `the docs have drifted:\n${problems.join('\n')}`).toEqual([]);
  });

  it('keep the README short enough to read in five minutes', () => {
    const lines = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length;
    expect(lines, 'README.md is over 250 lines: move the detail into docs/').toBeLessThanOrEqual(250);
  });
});

/** The problems the check finds in one page, docs/page.md, beside docs/other.md. */
async function problemsIn(markdown: string): Promise<string[]> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'rein-docs-check-'));
  scratch.push(root);
  mkdirSync(path.join(root, 'docs'));
  writeFileSync(path.join(root, 'docs/page.md'), markdown);
  writeFileSync(path.join(root, 'docs/other.md'), '# Other\n\n## A section: with `code`\n');
  return (await checkDocs({ ...ctx, root }, ['docs/page.md'])).map(formatProblem);
}

describe('the docs check', () => {
  it('accepts what is right', async () => {
    const page = [
      '# Page',
      '',
      '## Here',
      '',
      'See [other](other.md), [a section](other.md#a-section-with-code), [here](#here), [the web](https://example.com/x.md#nope).',
      '`rein train --config rein.yaml --follow`, `rein --config x.yaml gc --dry-run`, `rein schedule create NAME --every 1d`,',
      '`rein policy serve --model v0=models/base --port 8500`, `--follow`, `--heldout N`, `npm run docs`, `npm run bench:*`.',
      '`gateway.publicUrl`, `gateway.backends.vllm.endpoints`, `gateway.redact.rules[].regex`, `gate.maxRegression.latency: null`,',
      '`harness.local.env.<name>`, `gateway.*`. Files: `src/gate/gate.ts`, `kubernetes/job-executor.ts`, `faults.test.ts`,',
      '`test/integration/*-metrics.test.ts`, `deploy/postgres-init/`, `rein.json`, `dataDir/rollouts/<id>/`.',
      '',
      '```bash',
      'rein runs --json | jq --raw-output .   # a comment with --anything',
      './bin/rein.js train --config examples/calculator-agent/rein.yaml --follow',
      '```',
      '',
      '```yaml',
      'gateway:',
      '  backends:',
      '    vllm: { endpoints: [http://gpu:8000/v1] }',
      '  redact: { rules: [{ name: a, regex: b }] }',
      'harness: { local: { command: node, env: { A: "1" } } }',
      '```',
      '',
      '```yaml',
      'kind: Job',
      'spec: { anything: 1 }',
      '```',
    ].join('\n');
    expect(await problemsIn(page)).toEqual([]);
  });

  it('names the file, the line and what is wrong', async () => {
    const page = [
      '# Page', // 1
      '[gone](missing.md) and [no anchor](other.md#nope) and [here](#nowhere)', // 2
      '`rein trian`, `rein train --folow`, `rein schedule crate NAME`', // 3
      '`--nope`, `npm run nope`', // 4
      '`gateway.publicURL`, `gateway.backends.vllm.endpoint`', // 5
      '`src/gate/nope.ts`, `sqlite-store.test.ts`', // 6
      '```sh', // 7
      'rein runs --jsn | jq .', // 8
      '```', // 9
      '```yaml', // 10
      'gateway:', // 11
      '  portt: 1', // 12
      '```', // 13
    ].join('\n');
    expect(await problemsIn(page)).toEqual([
      'docs/page.md:2: link to missing.md: no such file docs/missing.md',
      'docs/page.md:2: link to other.md#nope: docs/other.md has no heading whose anchor is #nope',
      'docs/page.md:2: link to #nowhere: docs/page.md has no heading whose anchor is #nowhere',
      'docs/page.md:3: rein trian: no such command (see docs/reference/cli.md)',
      'docs/page.md:3: rein train --folow: not an option of rein train (see docs/reference/cli.md)',
      'docs/page.md:3: rein schedule crate: rein schedule has no subcommand crate (it has: create, list, pause, unpause, trigger, delete)',
      "docs/page.md:4: --nope: no rein command has this option (write another tool's flag with the tool's name)",
      'docs/page.md:4: npm run nope: package.json has no script nope',
      'docs/page.md:5: gateway.publicURL: not a key of the config file (see docs/reference/config.md)',
      'docs/page.md:5: gateway.backends.vllm.endpoint: not a key of the config file (see docs/reference/config.md)',
      'docs/page.md:6: src/gate/nope.ts: no such file or folder in the repository',
      'docs/page.md:6: sqlite-store.test.ts: no such file or folder in the repository',
      'docs/page.md:8: rein runs --jsn: not an option of rein runs (see docs/reference/cli.md)',
      'docs/page.md:12: gateway.portt: not a key of the config file (see docs/reference/config.md)',
    ]);
  });
});
