import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { selectionRolloutIds } from './rollout-id.js';
import {
  FAILURE_REASON_MAX,
  mergeShardSummaries,
  planShards,
  summarizeOutcomes,
  type SummarizedOutcome,
} from './shards.js';

const taskIdsArb = fc.uniqueArray(fc.stringMatching(/^[a-z0-9]{1,6}$/), { maxLength: 60 });

const outcomeArb = (taskId: string): fc.Arbitrary<SummarizedOutcome> =>
  fc.record({
    taskId: fc.constant(taskId),
    status: fc.constantFrom('succeeded', 'failed', 'cancelled'),
    failureClass: fc.constantFrom(null, 'model', 'infrastructure', 'verifier'),
    // Long ones too: a summary cuts them.
    reason: fc.option(fc.string({ maxLength: 300 }), { nil: null }),
    reward: fc.option(fc.double({ min: -5, max: 5, noNaN: true }), { nil: null }),
    rewardDisagrees: fc.boolean(),
  });

describe('planShards', () => {
  it('puts every rollout of the set in exactly one shard, whole tasks, about size rollouts each', () => {
    fc.assert(
      fc.property(taskIdsArb, fc.integer({ min: 1, max: 9 }), fc.integer({ min: 1, max: 100 }), (taskIds, k, size) => {
        const shards = planShards(taskIds, k, size);
        const ids = (tasks: readonly string[]) =>
          selectionRolloutIds({ batchId: 'b', taskIds: tasks, samplesPerTask: k });
        // The shards' rollout ids, in order, are the set's: none lost, none twice.
        expect(shards.flatMap(ids)).toEqual(ids(taskIds));
        for (const shard of shards) {
          expect(shard.length).toBeGreaterThan(0);
          // At most `size` rollouts, unless one task alone has more samples than that.
          expect(shard.length * k).toBeLessThanOrEqual(Math.max(size, k));
        }
        // Only the last shard may be short of a full one.
        for (const shard of shards.slice(0, -1)) expect(shard.length).toBe(Math.max(1, Math.floor(size / k)));
      }),
    );
  });

  it('keeps a set no larger than one shard in one shard (the one-activity path)', () => {
    expect(planShards(['a', 'b', 'c', 'd'], 16, 64)).toEqual([['a', 'b', 'c', 'd']]);
    expect(planShards([], 8, 64)).toEqual([]);
  });
});

describe('mergeShardSummaries', () => {
  it('equals the summary of all the outcomes, whatever the shard size', () => {
    const setArb = taskIdsArb.chain((taskIds) =>
      fc.record({
        taskIds: fc.constant(taskIds),
        samplesPerTask: fc.integer({ min: 1, max: 4 }),
        size: fc.integer({ min: 1, max: 20 }),
        outcomes: fc.tuple(...taskIds.map((t) => fc.array(outcomeArb(t), { minLength: 4, maxLength: 4 }))),
      }),
    );
    fc.assert(
      fc.property(setArb, ({ taskIds, samplesPerTask, size, outcomes }) => {
        const byTask = new Map(taskIds.map((t, i) => [t, (outcomes[i] ?? []).slice(0, samplesPerTask)]));
        const all = taskIds.flatMap((t) => byTask.get(t) ?? []);
        const shards = planShards(taskIds, samplesPerTask, size).map((tasks) =>
          summarizeOutcomes(
            'b',
            'h-1',
            tasks.flatMap((t) => byTask.get(t) ?? []),
          ),
        );
        const merged = mergeShardSummaries('b', shards);
        const whole = summarizeOutcomes('b', 'h-1', all);
        const { meanReward, ...counts } = merged;
        const { meanReward: wholeMean, ...wholeCounts } = whole;
        // Counts and per-task means exactly; the mean up to rounding (a weighted mean of means).
        expect(counts).toEqual({ ...wholeCounts, harnessVersion: shards.length > 0 ? 'h-1' : '' });
        if (wholeMean === null) expect(meanReward).toBeNull();
        else expect(meanReward).toBeCloseTo(wholeMean, 9);
      }),
    );
  });
});

describe('a summary of failed rollouts', () => {
  it('keeps the first reason met for each failure class, cut short', () => {
    const failed = (failureClass: string, reason: string): SummarizedOutcome => ({
      taskId: 't',
      status: 'failed',
      failureClass,
      reason,
      reward: 0,
      rewardDisagrees: false,
    });
    const summary = summarizeOutcomes('b', 'h', [
      failed('harness', 'the backend answered 400: too long'),
      failed('harness', 'exited with 2'),
      failed('infrastructure', 'x'.repeat(500)),
    ]);
    expect(summary.failureReasons).toEqual({
      harness: 'the backend answered 400: too long',
      infrastructure: `${'x'.repeat(FAILURE_REASON_MAX)}…`,
    });
    expect(summarizeOutcomes('b', 'h', []).failureReasons).toBeUndefined();
  });
});
