import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoredDecision } from '../registry/policy-registry.js';
import { rolloutIdFor } from '../rollouts/rollout-id.js';
import { SqliteTraceStore } from '../store/sqlite-store.js';
import type { MismatchCause } from '../samples/merge.js';
import {
  runBatches,
  runRollouts,
  RunCursorError,
  type MismatchRollouts,
  type RunBatch,
  type RunRolloutQuery,
} from './run-rollouts.js';

const decisionOf = (candidate: string, incumbent: string) =>
  ({
    record: {
      candidate: { version: candidate, batchId: `heldout.${candidate}`, taskIds: ['h'], samplesPerTask: 1 },
      incumbent: { version: incumbent, batchId: `heldout.${incumbent}`, taskIds: ['h'], samplesPerTask: 1 },
    },
  }) as unknown as StoredDecision;

describe("a run's batches", () => {
  it('lists each iteration newest first, its training batch before its replays', () => {
    const decisions: Record<string, StoredDecision> = { d1: decisionOf('r.v1', 'v0'), d2: decisionOf('r.v2', 'r.v1') };
    const iterations = [
      { iteration: 1, gate: { decisionId: 'd1' } },
      { iteration: 2, gate: { decisionId: 'd2' } },
    ];
    const batches = runBatches('r', iterations, 3, (id) => decisions[id]);
    expect(batches.map((b) => [b.batchId, b.iteration, b.kind, b.side])).toEqual([
      ['r.it3', 3, 'train', null],
      ['r.it2', 2, 'train', null],
      ['heldout.r.v2', 2, 'heldout', 'candidate'],
      ['heldout.r.v1', 2, 'heldout', 'incumbent'],
      ['r.it1', 1, 'train', null],
      ['heldout.r.v1', 1, 'heldout', 'candidate'],
      ['heldout.v0', 1, 'heldout', 'incumbent'],
    ]);
    // A decision the registry no longer has leaves its iteration's training batch.
    expect(runBatches('r', iterations, 2, () => undefined).map((b) => b.batchId)).toEqual(['r.it2', 'r.it1']);
  });
});

describe("a run's rollouts, page by page", () => {
  const store = new SqliteTraceStore(':memory:');
  const batches: RunBatch[] = [
    { batchId: 'r.it2', iteration: 2, kind: 'train', side: null },
    { batchId: 'heldout.r.v1', iteration: 1, kind: 'heldout', side: 'candidate' },
    { batchId: 'r.it1', iteration: 1, kind: 'train', side: null },
  ];
  beforeAll(async () => {
    // Three tasks × 2 samples per training batch, one task in the replay; a reward of 1 on sample 0 only.
    for (const batch of [...batches].reverse()) {
      const tasks = batch.kind === 'train' ? ['a', 'b', 'c'] : ['h'];
      for (const task of tasks)
        for (const sample of [0, 1]) {
          const id = rolloutIdFor(batch.batchId, task, sample);
          await store.createRollout({ id, taskId: task, mode: 'train', metadata: { batchId: batch.batchId, sample } });
          await store.setRolloutStatus(id, { status: 'running' }, 'admin');
          await store.appendEvent(id, 1, { type: 'reward', value: sample === 0 ? 1 : 0, components: {} }, 'admin');
        }
    }
  });
  afterAll(() => store.close());

  const all = async (query: RunRolloutQuery, mismatches?: MismatchRollouts) => {
    const seen: string[] = [];
    let after: string | undefined;
    for (let page = 0; page < 50; page++) {
      const { items, next } = await runRollouts(store, batches, { ...query, ...(after && { after }) }, mismatches);
      seen.push(...items.map((r) => r.rolloutId));
      if (next === null) return seen;
      after = next;
    }
    throw new Error('no last page');
  };

  it('reads every batch in order, whatever the page size, each rollout once', async () => {
    const everything = await all({ limit: 500 });
    expect(everything).toHaveLength(14);
    expect(everything.slice(0, 2)).toEqual(['r.it2.c.1', 'r.it2.c.0']);
    for (const limit of [1, 2, 5, 6, 13]) expect(await all({ limit })).toEqual(everything);
  });

  it('filters by iteration, kind, task and reward, with each row placed in its run', async () => {
    expect(await all({ iteration: 1, kind: 'heldout' })).toEqual(['heldout.r.v1.h.1', 'heldout.r.v1.h.0']);
    expect(await all({ taskId: 'b', minReward: 1, limit: 1 })).toEqual(['r.it2.b.0', 'r.it1.b.0']);
    const [row] = (await runRollouts(store, batches, { kind: 'heldout', maxReward: 0 })).items;
    expect(row).toMatchObject({
      rolloutId: 'heldout.r.v1.h.1',
      iteration: 1,
      kind: 'heldout',
      side: 'candidate',
      taskId: 'h',
      sample: 1,
      status: 'running',
      reward: 0,
    });
  });

  it('reads a replay two gates share once, under the newest iteration the filters keep', async () => {
    const shared: RunBatch[] = [
      { batchId: 'heldout.r.v1', iteration: 2, kind: 'heldout', side: 'incumbent' },
      ...batches,
    ];
    const replay = ['heldout.r.v1.h.1', 'heldout.r.v1.h.0'];
    expect(await all({ kind: 'heldout' })).toEqual(replay);
    const rows = (await runRollouts(store, shared, { kind: 'heldout' })).items;
    expect(rows.map((r) => [r.rolloutId, r.iteration, r.side])).toEqual([
      [replay[0], 2, 'incumbent'],
      [replay[1], 2, 'incumbent'],
    ]);
    const first = (await runRollouts(store, shared, { kind: 'heldout', iteration: 1 })).items;
    expect(first.map((r) => [r.rolloutId, r.iteration, r.side])).toEqual([
      [replay[0], 1, 'candidate'],
      [replay[1], 1, 'candidate'],
    ]);
  });

  it('filters by merge cause, as each iteration’s batch report names the rollouts, whatever the page size', async () => {
    const reports: Record<number, Partial<Record<MismatchCause, string[]>>> = {
      2: { harness_rewrote_history: ['r.it2.a.1', 'r.it2.c.0'], new_conversation: ['r.it2.b.0'] },
      1: { harness_rewrote_history: ['r.it1.b.1'] },
    };
    const asked: number[] = [];
    const mismatches: MismatchRollouts = async (iteration) => (asked.push(iteration), reports[iteration] ?? {});
    const rewrote = ['r.it2.c.0', 'r.it2.a.1', 'r.it1.b.1'];
    for (const limit of [1, 2, 3, 50])
      expect(await all({ mergeCause: 'harness_rewrote_history', limit }, mismatches)).toEqual(rewrote);
    // Held-out replays have no merge causes: never read for this filter.
    expect(asked.every((i) => i === 1 || i === 2)).toBe(true);
    expect(await all({ mergeCause: 'new_conversation', minReward: 1 }, mismatches)).toEqual(['r.it2.b.0']);
    expect(await all({ mergeCause: 'lossy_decode' }, mismatches)).toEqual([]);
  });

  it('refuses a cursor it did not give, naming what to send instead', async () => {
    await expect(runRollouts(store, batches, { after: 'nonsense' })).rejects.toThrow(RunCursorError);
    const { next } = await runRollouts(store, batches, { limit: 1 });
    // A cursor into the training batches, used with a filter that leaves them out.
    await expect(runRollouts(store, batches, { kind: 'heldout', after: next! })).rejects.toThrow(/do not list/);
  });
});
