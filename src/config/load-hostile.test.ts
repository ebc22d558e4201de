import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runRein } from '../../test/helpers/cli.js';
import { ConfigError, loadConfig, validateConfig } from './load.js';

// A config file is written by hand, but may come from anywhere: whatever is wrong with it must
// end in a ConfigError (exit 2) that names the file and the problem, never a crash or a silent default.

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-config-hostile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string | Buffer): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

function refusal(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

const load = (file: string) => loadConfig({ file, env: {} });
const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;

describe('loadConfig refuses hostile files with the file named', () => {
  it('deeply nested YAML and JSON', () => {
    for (const file of [
      write('deep.yaml', `run:\n  evalHarnessEnv: ${deep(5000)}\n`),
      write('deep.json', `{"run": {"evalHarnessEnv": ${deep(5000)}}}`),
    ]) {
      const err = refusal(() => load(file));
      expect(err.source).toBe(file);
      expect(err.problems.join('\n')).toMatch(/nested more than \d+ levels deep/);
    }
  });

  it('a YAML tag it cannot resolve, which would otherwise be read as a plain string', () => {
    const file = write(
      'tagged.yaml',
      "log: { level: !!js/function 'function () { return 1 }' }\ndataDir: !custom ./data\n",
    );
    const err = refusal(() => load(file));
    expect(err.source).toBe(file);
    expect(err.problems).toEqual([
      expect.stringMatching(
        /^Unresolved tag: tag:yaml\.org,2002:js\/function at line 1, column 15: a config holds plain YAML data/,
      ),
      expect.stringMatching(/^Unresolved tag: !custom at line 2, column 10: .*remove the tag$/),
    ]);
  });

  it('a top level that is a list or a scalar', () => {
    for (const [name, text] of [
      ['list.yaml', '- a\n- b\n'],
      ['scalar.yaml', 'hello\n'],
      ['list.json', '[1]'],
      ['null.json', 'null'],
    ] as const) {
      const err = refusal(() => load(write(name, text)));
      expect(err.source).toBe(path.join(dir, name));
      expect(err.problems).toEqual([expect.stringMatching(/^\(top level\): got .*; expected a mapping of settings/)]);
    }
  });

  it('an empty file is the defaults', () => {
    expect(load(write('empty.yaml', '')).config.dataDir).toBe(path.join(dir, '.rein'));
    expect(load(write('comment.yaml', '# nothing yet\n')).config.dataDir).toBe(path.join(dir, '.rein'));
  });

  it('a YAML alias bomb', () => {
    let text = 'a: &a [x, x, x, x, x, x, x, x, x, x]\n';
    for (let i = 1, prev = 'a'; i <= 8; prev = `b${i}`, i++)
      text += `b${i}: &b${i} [${Array(10).fill(`*${prev}`).join(', ')}]\n`;
    const file = write('bomb.yaml', text);
    const err = refusal(() => load(file));
    expect(err.source).toBe(file);
    expect(err.problems[0]).toMatch(/aliases/);
  });

  it('a file too large to be a config', () => {
    const file = write(
      'huge.yaml',
      `run:\n  evalHarnessEnv:\n${'    K: "0123456789012345678901234567890123456789"\n'.repeat(200_000)}`,
    );
    const err = refusal(() => load(file));
    expect(err.source).toBe(file);
    expect(err.problems[0]).toMatch(/larger than 1 MiB/);
  });

  it('invalid UTF-8', () => {
    const file = write(
      'latin1.yaml',
      Buffer.concat([Buffer.from('dataDir: "a'), Buffer.from([0xff, 0xfe]), Buffer.from('b"\n')]),
    );
    const err = refusal(() => load(file));
    expect(err.source).toBe(file);
    expect(err.problems[0]).toMatch(/not valid UTF-8/);
  });

  it('NUL bytes and broken characters in paths and other strings', () => {
    expect(refusal(() => load(write('nul.yaml', 'dataDir: "a\\0b"\n'))).problems).toEqual([
      expect.stringMatching(/^dataDir: contains a NUL byte/),
    ]);
    expect(refusal(() => load(write('nul.json', '{"run": {"trainTasks": "t\\u0000.jsonl"}}'))).problems).toEqual([
      expect.stringMatching(/^run\.trainTasks: contains a NUL byte/),
    ]);
    expect(
      refusal(() => load(write('surrogate.json', '{"run": {"heldoutTasks": "h\\ud800.jsonl"}}'))).problems,
    ).toEqual([expect.stringMatching(/^run\.heldoutTasks: .*not valid Unicode/)]);
  });

  it('names that are also Object property names are plain names', () => {
    expect(
      refusal(() =>
        validateConfig({ gateway: { backends: { constructor: { endpoints: ['http://a/v1'], bogus: 1 } } } }, 'test'),
      ).problems,
    ).toEqual([
      'gateway.backends.constructor: unknown key "bogus"; expected one of: endpoints, apiKeyEnv, tokenIds, weightSync, logprobs, nativeApis, tokenIn, maxInFlight, maxQueueWaitSeconds',
    ]);
    expect(refusal(() => validateConfig({ toString: 1 }, 'test')).problems).toEqual([
      expect.stringMatching(/^\(top level\): unknown key "toString"; expected one of: \$schema, dataDir/),
    ]);
  });

  it('an invalid regular expression, at check time', () => {
    expect(
      refusal(() => validateConfig({ gateway: { redact: { rules: [{ name: 'x', regex: '([a-z' }] } } }, 'test'))
        .problems,
    ).toEqual([
      expect.stringMatching(
        /^gateway\.redact\.rules\.0\.regex: got "\(\[a-z"; expected a valid regular expression \(Invalid regular expression/,
      ),
    ]);
    expect(refusal(() => validateConfig({ rollouts: { refusalPatterns: ['fine', '*bad'] } }, 'test')).problems).toEqual(
      [expect.stringMatching(/^rollouts\.refusalPatterns\.1: got "\*bad"; expected a valid regular expression/)],
    );
  });
});

describe('rein config check', () => {
  it('exits 2 naming the file for a deeply nested config and an invalid redact pattern', async () => {
    const deepFile = write('cli-deep.json', `{"run": {"evalHarnessEnv": ${deep(5000)}}}`);
    const regexFile = write('cli-regex.yaml', 'gateway:\n  redact:\n    rules:\n      - { name: x, regex: "([a-z" }\n');
    const [nested, regex] = await Promise.all([
      runRein(['config', 'check', deepFile]),
      runRein(['config', 'check', regexFile]),
    ]);
    expect(nested).toMatchObject({ code: 2, stderr: expect.stringContaining(deepFile) });
    expect(regex).toMatchObject({ code: 2, stderr: expect.stringContaining('gateway.redact.rules.0.regex') });
  }, 180_000); // two CLI starts through tsx, on a busy machine
});
