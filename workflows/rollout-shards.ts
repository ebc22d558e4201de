import { patched, proxyActivities, sleep, upsertMemo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { RunRolloutsInput, RunRolloutsSummary } from '../activities/run-rollouts.js';
import { mergeShardSummaries, planShards, type ShardSettings } from '../src/rollouts/shards.js';
import { callOptions, ROLLOUT_ACTIVITY } from './activity-options.js';

const { runRollouts } = proxyActivities<Activities>(ROLLOUT_ACTIVITY);

/**
 * Marks the histories of sets run in shards: a history recorded before (one activity per set)
 * replays the one activity, whatever the set's size.
 */
export const ROLLOUT_SHARDS_PATCH = 'rollout-shards';

/** Rollouts of the workflow's sharded sets: those in finished shards, and in all. */
export interface ShardedProgress {
  /** Rollouts of the shards that finished (the running shards' own progress is in their heartbeats). */
  doneInFinishedShards: number;
  total: number;
  shards: number;
  finishedShards: number;
}

/**
 * The memo key under which a workflow keeps its sharded sets' progress (ShardedProgress), updated
 * as each shard finishes: `rein status` adds the running shards' heartbeats to it, with no worker
 * needed to answer (a query would wait on a dead worker's sticky queue).
 */
export const SHARDS_MEMO = 'rolloutShards';

/** Each sharded set this workflow runs now, by the total of its shards that finished (workflow-scoped state). */
const runningSets = new Set<{ shards: number[]; finished: Set<number> }>();

/** The progress over the sets running now, into the memo. */
function recordProgress(): void {
  const progress: ShardedProgress = { doneInFinishedShards: 0, total: 0, shards: 0, finishedShards: 0 };
  for (const set of runningSets) {
    progress.shards += set.shards.length;
    progress.total += set.shards.reduce((a, b) => a + b, 0);
    progress.finishedShards += set.finished.size;
    for (const i of set.finished) progress.doneInFinishedShards += set.shards[i] ?? 0;
  }
  upsertMemo({ [SHARDS_MEMO]: progress });
}

/**
 * Whether this set runs in shards: more than one shard's worth, in a history that is not an old
 * one (which ran every set as one activity).
 */
export function runsInShards(input: Pick<RunRolloutsInput, 'taskIds' | 'samplesPerTask'>, settings: ShardSettings) {
  return planShards(input.taskIds, input.samplesPerTask, settings.size).length > 1 && patched(ROLLOUT_SHARDS_PATCH);
}

export interface ShardedSetOptions {
  /** What the Web UI shows for each shard's activity (with the shard's number). */
  summary: string;
  heartbeatTimeoutSeconds: number | undefined;
  /** Bounds each shard's activity instead of ROLLOUT_ACTIVITY's start-to-close. */
  timeoutMinutes?: number;
  settings: ShardSettings;
  /** Extra rounds for the shards with unscored rollouts, each after a longer pause (10 s, 20 s, ...). */
  rescoreRounds: number;
}

/**
 * A set of rollouts as shards of whole tasks, each the runRollouts activity on a slice of the
 * set's tasks (the same rollout ids, `<batchId>.<task>.<sample>`), at most `inFlight` at once on
 * whichever workers poll the task queue. A worker lost mid-shard costs that shard's retry on
 * another worker, which reads its finished rollouts back and resumes the running ones.
 */
export async function shardedRollouts(
  input: RunRolloutsInput,
  options: ShardedSetOptions,
): Promise<RunRolloutsSummary> {
  const { settings } = options;
  const inFlight = Math.max(1, settings.inFlight);
  const shards: RunRolloutsInput[] = planShards(input.taskIds, input.samplesPerTask, settings.size).map((taskIds) => ({
    ...input,
    taskIds,
    concurrencyShare: inFlight,
  }));
  const set = { shards: shards.map((s) => s.taskIds.length * s.samplesPerTask), finished: new Set<number>() };
  runningSets.add(set);
  recordProgress();
  const activityOptions = {
    ...callOptions(options.heartbeatTimeoutSeconds),
    // Eagerly dispatched, every shard would go to the worker whose workflow task scheduled it.
    allowEagerDispatch: false,
    ...(options.timeoutMinutes !== undefined && { startToCloseTimeout: `${options.timeoutMinutes} minutes` }),
  };
  const results: RunRolloutsSummary[] = [];
  const runShard = async (i: number) => {
    set.finished.delete(i);
    const summary = `${options.summary} (shard ${i + 1}/${shards.length})`;
    results[i] = await runRollouts.executeWithOptions({ ...activityOptions, summary }, [shards[i] as RunRolloutsInput]);
    set.finished.add(i);
    recordProgress();
  };
  try {
    await atMostAtOnce(
      shards.map((_, i) => i),
      inFlight,
      runShard,
    );
    for (let round = 1; round <= options.rescoreRounds; round++) {
      const unscored = results.flatMap((r, i) => (r.unscored > 0 ? [i] : []));
      if (unscored.length === 0) break;
      await sleep(`${10 * round} seconds`);
      await atMostAtOnce(unscored, inFlight, runShard);
    }
  } finally {
    runningSets.delete(set);
    recordProgress();
  }
  return mergeShardSummaries(input.batchId, results);
}

/**
 * Runs `run` on each item, at most `limit` at once, in the items' order; after a failure nothing
 * more starts, and it fails with that failure.
 */
async function atMostAtOnce<T>(items: readonly T[], limit: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  const lane = async () => {
    while (next < items.length && !failed) {
      try {
        await run(items[next++] as T);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}
