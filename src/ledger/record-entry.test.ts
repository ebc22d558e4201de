import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadEnvironment } from '../environments/load.js';
import { environmentSchema } from '../environments/settings.js';
import { rolloutSettings } from '../rollouts/config.js';
import { harnessSchema, harnessVersion, verifierSchema } from '../rollouts/harness-spec.js';
import { SqliteTraceStore } from '../store/sqlite-store.js';
import { environmentKeys } from './environment.js';
import { openLedger } from './open.js';
import { recordFromRollouts, type LedgerEntryRequest } from './record-entry.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-ledger-entry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('recordFromRollouts', () => {
  it("records a row from the set's rollouts once: a retry leaves the first one as it is", async () => {
    const ledger = await openLedger({ dataDir: dir, postgresUrl: null });
    const store = new SqliteTraceStore(':memory:');
    for (const [taskId, reward] of [
      ['t1', 1],
      ['t2', 0],
    ] as const) {
      const id = `run.it1.${taskId}.0`;
      await store.createRollout({ id, taskId, metadata: { sample: 0 } });
      await store.startAttempt(id);
      await store.setRolloutStatus(id, { status: 'running' }, 'admin');
      await store.appendEvent(id, 2, { type: 'reward', value: reward, components: {} }, 'admin');
      await store.setRolloutStatus(id, { status: 'succeeded' }, 'admin');
    }
    const harness = harnessSchema.parse({ version: '7', local: { command: 'agent' } });
    const verifier = verifierSchema.parse({ command: 'verify', version: 'v3' });
    const rollouts = rolloutSettings.parse({});
    const sources = { ledger, store, harness, verifier, rollouts, acceptReward: 1 };
    const request: LedgerEntryRequest = {
      id: 'run.it1',
      kind: 'iteration',
      runId: 'run',
      iteration: 1,
      policyVersion: 'run.v1',
      parent: 'base',
      taskSet: { sha256: 'a'.repeat(64) },
      sets: [{ batchId: 'run.it1', taskIds: ['t1', 't2'], samplesPerTask: 1 }],
      elapsedSeconds: 12,
      decisionId: null,
    };
    await recordFromRollouts(sources, request);
    const recorded = await ledger.get('run.it1');
    expect(recorded).toMatchObject({
      kind: 'iteration',
      runId: 'run',
      iteration: 1,
      decisionId: null,
      batchIds: ['run.it1'],
      model: { policyVersion: 'run.v1', parent: 'base' },
      harness: { version: harnessVersion(harness) },
      environment: environmentKeys('a'.repeat(64), verifier, rollouts),
      metrics: { rollouts: 2, unscored: 0, acceptedRate: 0.5, elapsedSeconds: 12 },
    });
    await recordFromRollouts(sources, { ...request, elapsedSeconds: 99, sets: [] });
    expect(await ledger.get('run.it1')).toEqual(recorded);
    expect(recorded?.environment).not.toHaveProperty('module');

    // A run with an environment module keys the environment ledger with its id: a changed module is a changed world.
    const module = path.join(import.meta.dirname, '..', '..', 'examples', 'calculator-agent', 'environment.mjs');
    const environment = environmentSchema.parse({ module });
    await recordFromRollouts({ ...sources, environment }, { ...request, id: 'run.it1.env' });
    expect((await ledger.get('run.it1.env'))?.environment).toEqual({
      ...environmentKeys('a'.repeat(64), verifier, rollouts),
      module: (await loadEnvironment(module)).id,
    });
    expect((await loadEnvironment(module)).id).toMatch(/^calculator@calculator-env-1:[0-9a-f]{12}$/);
    // The variants its training rollouts ran in are part of that environment too, in one order.
    await recordFromRollouts(
      { ...sources, environment },
      { ...request, id: 'run.it1.v', environmentVariants: ['v-b', 'v-a'] },
    );
    expect((await ledger.get('run.it1.v'))?.environment).toMatchObject({ variants: ['v-a', 'v-b'] });
    await ledger.close();
  });
});
