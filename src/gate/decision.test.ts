import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openRegistry } from '../registry/open.js';
import { SqliteTraceStore } from '../store/sqlite-store.js';
import type { TraceStore } from '../store/trace-store.js';
import { gateSettings } from './config.js';
import { decideGate, type GateRequest } from './decision.js';
import { GateInputError } from './gate.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-decision-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const gate = gateSettings.parse({});
const TASKS = ['t1', 't2', 't3', 't4', 't5', 't6'];

/** A held-out replay of `tasks` in `batchId`, one sample each: its verifier's reward, or null: lost to a fault. */
async function replay(store: TraceStore, batchId: string, rewards: ReadonlyArray<number | null>, tasks = TASKS) {
  for (const [i, taskId] of tasks.entries()) {
    const id = `${batchId}.${taskId}.0`;
    await store.createRollout({ id, taskId, mode: 'eval', metadata: { sample: 0 } });
    await store.startAttempt(id);
    await store.setRolloutStatus(id, { status: 'running' }, 'admin');
    const reward = rewards[i] ?? null;
    if (reward === null) {
      await store.setRolloutStatus(id, { status: 'failed', failureClass: 'infrastructure' }, 'admin');
    } else {
      await store.appendEvent(id, 2, { type: 'reward', value: reward, components: {} }, 'admin');
      await store.setRolloutStatus(id, { status: 'succeeded' }, 'admin');
    }
  }
}

const request = (decisionId: string, candidateTasks = TASKS): GateRequest => ({
  decisionId,
  candidate: 'v2',
  incumbent: 'v1',
  candidateSet: { batchId: 'heldout.v2', taskIds: candidateTasks, samplesPerTask: 1 },
  incumbentSet: { batchId: 'heldout.v1', taskIds: TASKS, samplesPerTask: 1 },
});

describe('decideGate', () => {
  it('decides from the paired replays once, and keeps the decision with its rules, sets and links', async () => {
    const registry = await openRegistry({ dataDir: mkdtempSync(path.join(dir, 'once-')), postgresUrl: null });
    const store = new SqliteTraceStore(':memory:');
    await replay(store, 'heldout.v1', [0, 0, 0, 0, 0, 0]);
    await replay(store, 'heldout.v2', [1, 1, 1, 1, 1, 1]);
    const decided = await decideGate({ store, registry, gate, gateway: { url: 'http://gw' } }, request('d1'));
    expect(decided).toMatchObject({ id: 'd1', candidate: 'v2', incumbent: 'v1', verdict: 'pass' });
    const { autoPromote: _autoPromote, ...rules } = gate;
    expect(decided.record).toMatchObject({
      verdict: 'pass',
      rules,
      candidate: { version: 'v2', batchId: 'heldout.v2', taskIds: TASKS, samplesPerTask: 1 },
      incumbent: { version: 'v1', batchId: 'heldout.v1', taskIds: TASKS, samplesPerTask: 1 },
      harnessVersion: null,
      traces: 'http://gw/api/rollouts/{rolloutId}',
    });
    expect(decided.record).not.toHaveProperty('rules.autoPromote');
    // Kept: asked again it is not made again, so the replays are not even read.
    const empty = new SqliteTraceStore(':memory:');
    expect(await decideGate({ store: empty, registry, gate }, request('d1'))).toEqual(decided);
    await registry.close();
  });

  it('makes an insufficient decision again, since its replays may have been completed since', async () => {
    const registry = await openRegistry({ dataDir: mkdtempSync(path.join(dir, 'again-')), postgresUrl: null });
    const lossy = new SqliteTraceStore(':memory:');
    await replay(lossy, 'heldout.v1', [0, null, null, null, 0, 0]);
    await replay(lossy, 'heldout.v2', [1, 1, 1, 1, 1, 1]);
    expect((await decideGate({ store: lossy, registry, gate }, request('d2'))).verdict).toBe('insufficient');
    const completed = new SqliteTraceStore(':memory:');
    await replay(completed, 'heldout.v1', [0, 0, 0, 0, 0, 0]);
    await replay(completed, 'heldout.v2', [1, 1, 1, 1, 1, 1]);
    expect((await decideGate({ store: completed, registry, gate }, request('d2'))).verdict).toBe('pass');
    expect((await registry.decision('d2'))?.verdict).toBe('pass');
    await registry.close();
  });

  it('refuses replays that do not pair, and keeps nothing', async () => {
    const registry = await openRegistry({ dataDir: mkdtempSync(path.join(dir, 'unpaired-')), postgresUrl: null });
    const store = new SqliteTraceStore(':memory:');
    await replay(store, 'heldout.v1', [0, 0, 0, 0, 0, 0]);
    await replay(store, 'heldout.v2', [1, 1, 1, 1, 1], TASKS.slice(0, 5));
    await expect(decideGate({ store, registry, gate }, request('d3', TASKS.slice(0, 5)))).rejects.toThrow(
      new GateInputError('task t6 sample 0 has no candidate rollout (incumbent rollout heldout.v1.t6.0)'),
    );
    expect(await registry.decision('d3')).toBeUndefined();
    await registry.close();
  });
});
