import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, describe, expect, it } from 'vitest';
import { runDepsFor, runnableRunDeps } from './run-deps.js';
import { LocalArtifactStore } from '../src/artifacts/local-store.js';
import { configHash } from '../src/config/config-hash.js';
import { validateConfig } from '../src/config/load.js';
import { runConfigOf, storeRunConfig } from '../src/config/run-config.js';
import type { ReinConfig } from '../src/config/schema.js';
import { storedRunDeps } from '../workers/run-configs.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-run-configs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A config whose harness is `node <script>`: the script's name tells two configs apart. */
const configWith = (script: string, more: object = {}): ReinConfig =>
  validateConfig(
    {
      harness: { version: script, local: { command: process.execPath, args: [script, '{task}', '{output}'] } },
      verifier: { command: process.execPath, args: ['verifier.mjs'] },
      rollouts: { concurrency: 3 },
      ...more,
    },
    'test',
  );

const pacing = { concurrency: 5, dependencyWaitSeconds: 7 };
const failureOf = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (err: unknown) => err,
  );

describe("a worker's runs, each from its own stored config", () => {
  it("loads a run's config by its hash, whatever the worker's own, with the worker's pacing", async () => {
    const store = new LocalArtifactStore(path.join(dir, 'a'));
    const a = configWith('a.mjs');
    const b = configWith('b.mjs', { samples: { estimator: 'rloo' }, gate: { acceptReward: 0.5 } });
    const stored = await storeRunConfig(store, b);
    expect(stored).toEqual({ configHash: configHash(b), uri: store.uriOf(`configs/${configHash(b)}.json`) });
    const runs = storedRunDeps({ artifacts: store, pacing, own: runConfigOf(a) });

    const run = await runs.forRun(configHash(b));
    expect(run).toMatchObject({
      configHash: configHash(b),
      harness: b.harness,
      verifier: b.verifier,
      samples: { estimator: 'rloo' },
      gate: { acceptReward: 0.5 },
      rollouts: { ...pacing, hiddenFields: ['answer'], maxAttempts: 2 },
    });
    // The worker's own config serves its own hash, and a set started by hand that names none.
    expect((await runs.forRun(configHash(a))).harness).toEqual(a.harness);
    expect((await runs.forRun(undefined)).harness).toEqual(a.harness);
  });

  it('stores a config once, as the exact text its hash is of', async () => {
    const store = new LocalArtifactStore(path.join(dir, 'b'));
    const config = configWith('once.mjs');
    const first = await storeRunConfig(store, config);
    const before = await store.listEntries('configs/');
    // The same config again, from another process with other log and port settings: the same object.
    const again = await storeRunConfig(store, { ...config, log: { ...config.log, level: 'debug' } });
    expect(again).toEqual(first);
    expect(await store.listEntries('configs/')).toEqual(before);
    const text = readFileSync(fileURLToPath(first.uri), 'utf8');
    expect(runConfigOf(config).configHash).toBe(first.configHash);
    expect(text).toContain('"once.mjs"');
  });

  it('keeps a loaded config (least recently used out first) and does not keep a failed load', async () => {
    const store = new LocalArtifactStore(path.join(dir, 'c'));
    const [x, y] = [configWith('x.mjs'), configWith('y.mjs')];
    const [sx, sy] = [await storeRunConfig(store, x), await storeRunConfig(store, y)];
    const runs = storedRunDeps({ artifacts: store, pacing, cacheSize: 1 });
    await runs.forRun(sx.configHash);
    await store.delete(sx.uri);
    // Kept: the config is not read again.
    expect((await runs.forRun(sx.configHash)).harness).toEqual(x.harness);
    await runs.forRun(sy.configHash);
    expect(runs.loaded()).toEqual([sy.configHash]);
    // Pushed out by y, and no longer in the store: now it is missed.
    expect(await failureOf(runs.forRun(sx.configHash))).toMatchObject({ name: 'RunConfigNotStoredError' });
    expect(runs.loaded()).toEqual([sy.configHash]);
    await storeRunConfig(store, x);
    expect((await runs.forRun(sx.configHash)).harness).toEqual(x.harness);
  });

  it('fails for good, saying what to do, on a config missing from the store or changed there', async () => {
    const store = new LocalArtifactStore(path.join(dir, 'd'));
    const runs = storedRunDeps({ artifacts: store, pacing });
    const missing = await failureOf(runDepsFor(runs, '0123456789abcdef'));
    expect(missing).toBeInstanceOf(ApplicationFailure);
    expect(missing).toMatchObject({
      type: 'RunConfigError',
      nonRetryable: true,
      message:
        `run's config 0123456789abcdef is not in the artifact store at ${store.url}; start the run with a client of this version ` +
        '(it stores configs/0123456789abcdef.json when a run starts), and give the client and every worker the same artifacts.url',
    });

    const stored = await storeRunConfig(store, configWith('changed.mjs'));
    const file = fileURLToPath(stored.uri);
    writeFileSync(file, readFileSync(file, 'utf8').replace('changed.mjs', 'other.mjs'));
    expect(await failureOf(runDepsFor(runs, stored.configHash))).toMatchObject({
      type: 'RunConfigError',
      nonRetryable: true,
      message: expect.stringMatching(
        /^the run config at .* hashes to [0-9a-f]{16}, not [0-9a-f]{16}: it changed after/,
      ),
    });
    expect(await failureOf(runDepsFor(runs, 'cfg'))).toMatchObject({
      type: 'RunConfigError',
      message: expect.stringContaining('"cfg" is not a run\'s config hash (16 hex digits)'),
    });
  });

  it('refuses for good a run whose harness this worker cannot start, naming what is missing and the fix', async () => {
    const store = new LocalArtifactStore(path.join(dir, 'e'));
    const elsewhere = validateConfig(
      {
        harness: { local: { command: '/opt/agent/bin/harness', cwd: '/opt/agent/work' } },
        verifier: { command: process.execPath, args: ['verifier.mjs'] },
      },
      'test',
    );
    const { configHash: hash } = await storeRunConfig(store, elsewhere);
    const refused = await failureOf(runnableRunDeps(storedRunDeps({ artifacts: store, pacing }), hash));
    expect(refused).toBeInstanceOf(ApplicationFailure);
    expect(refused).toMatchObject({ type: 'RolloutSetupError', nonRetryable: true });
    const { message } = refused as ApplicationFailure;
    expect(message).toContain(`this worker cannot run the harness of run config ${hash}:`);
    expect(message).toContain('harness.cwd: /opt/agent/work is not a directory');
    expect(message).toContain('harness.command: /opt/agent/bin/harness is not an executable file');
    expect(message).toContain('run the workers where those paths exist');
    // One it can run goes through.
    const { configHash: runnable } = await storeRunConfig(store, configWith('fine.mjs'));
    expect((await runnableRunDeps(storedRunDeps({ artifacts: store, pacing }), runnable)).harness).toBeDefined();
  });
});
