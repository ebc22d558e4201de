/**
 * A rollout set split into shards that several workers run at once, and the set's summary put back
 * together from theirs. Pure and free of Node.js imports: the workflows plan and merge with it.
 */

/** How a set is split: the config's `rollouts.shard` (see config.ts), carried by the workflows' inputs. */
export interface ShardSettings {
  /** About this many rollouts per shard: whole tasks only, at least one task. */
  size: number;
  /** Shards of one set running at once, on any workers. */
  inFlight: number;
}

export const DEFAULT_SHARD_SETTINGS: ShardSettings = { size: 64, inFlight: 4 };

/**
 * The set's tasks in shards of ⌊size / samplesPerTask⌋ tasks (at least one), in order: a task's
 * samples never straddle two shards, so a task's mean reward (a GRPO group) comes whole from one.
 */
export function planShards(taskIds: readonly string[], samplesPerTask: number, size: number): string[][] {
  const tasksPerShard = Math.max(1, Math.floor(size / Math.max(1, samplesPerTask)));
  const shards: string[][] = [];
  for (let first = 0; first < taskIds.length; first += tasksPerShard)
    shards.push(taskIds.slice(first, first + tasksPerShard));
  return shards;
}

/** One rollout's outcome, as much of it as a summary reads. */
export interface SummarizedOutcome {
  taskId: string;
  status: string;
  failureClass: string | null;
  /** Why it failed, in words (the failure's reason); absent or null when it did not. */
  reason?: string | null;
  /** The verifier's reward; null when unscored. */
  reward: number | null;
  rewardDisagrees: boolean;
}

/** What a set of rollouts (or one shard of it) came to. */
export interface RolloutSetSummary {
  batchId: string;
  harnessVersion: string;
  total: number;
  byStatus: Record<string, number>;
  byFailureClass: Record<string, number>;
  /**
   * One failed rollout's reason per failure class (the first met, cut to FAILURE_REASON_MAX characters), so a report
   * says why without opening a rollout; absent when none failed (and in summaries written before it existed).
   */
  failureReasons?: Record<string, string>;
  /** Over the scored rollouts; null when none was scored. */
  meanReward: number | null;
  /**
   * Rollouts lost to a fault before the verifier scored them (infrastructure, orchestrator,
   * verifier, environment, cancelled).
   */
  unscored: number;
  /** Rollouts whose harness reported a reward the verifier did not give. */
  rewardDisagreements: number;
  /** Mean reward per task over its scored samples, for paired comparisons; a task with none scored is absent. */
  meanRewardByTask: Record<string, number>;
}

export function summarizeOutcomes(
  batchId: string,
  harnessVersion: string,
  outcomes: readonly SummarizedOutcome[],
): RolloutSetSummary {
  const count = (key: (o: SummarizedOutcome) => string | null) =>
    outcomes.reduce<Record<string, number>>((acc, o) => {
      const k = key(o);
      if (k !== null) acc[k] = (acc[k] ?? 0) + 1;
      return acc;
    }, {});
  // One rule for every mean: unscored rollouts are left out, never counted as 0.
  const rewards = outcomes.flatMap((o) => (o.reward === null ? [] : [o.reward]));
  return {
    batchId,
    harnessVersion,
    total: outcomes.length,
    byStatus: count((o) => o.status),
    byFailureClass: count((o) => o.failureClass),
    ...withReasons(firstReasons(outcomes)),
    meanReward: rewards.length === 0 ? null : rewards.reduce((a, b) => a + b, 0) / rewards.length,
    unscored: outcomes.length - rewards.length,
    rewardDisagreements: outcomes.filter((o) => o.rewardDisagrees).length,
    meanRewardByTask: meanRewardByTask(outcomes),
  };
}

/** The longest failure reason a summary keeps: it travels in workflow results and the run's memo. */
export const FAILURE_REASON_MAX = 240;

function firstReasons(outcomes: readonly SummarizedOutcome[]): Record<string, string> {
  const reasons: Record<string, string> = {};
  for (const { failureClass, reason } of outcomes) {
    if (failureClass === null || !reason || Object.hasOwn(reasons, failureClass)) continue;
    reasons[failureClass] = reason.length > FAILURE_REASON_MAX ? `${reason.slice(0, FAILURE_REASON_MAX)}…` : reason;
  }
  return reasons;
}

/** The first shard's reason for each class, as the first rollout's stands within a shard. */
function firstShardReasons(shards: readonly RolloutSetSummary[]): Record<string, string> {
  const reasons: Record<string, string> = {};
  for (const shard of shards)
    for (const [failureClass, reason] of Object.entries(shard.failureReasons ?? {}))
      if (!Object.hasOwn(reasons, failureClass)) reasons[failureClass] = reason;
  return reasons;
}

const withReasons = (reasons: Record<string, string>) =>
  Object.keys(reasons).length > 0 ? { failureReasons: reasons } : {};

function meanRewardByTask(outcomes: readonly SummarizedOutcome[]): Record<string, number> {
  const sums = new Map<string, { sum: number; n: number }>();
  for (const o of outcomes) {
    if (o.reward === null) continue;
    const entry = sums.get(o.taskId) ?? { sum: 0, n: 0 };
    entry.sum += o.reward;
    entry.n += 1;
    sums.set(o.taskId, entry);
  }
  return Object.fromEntries([...sums].map(([task, { sum, n }]) => [task, sum / n]));
}

/**
 * The set's summary from its shards' (planShards: no task in two shards). The mean reward is
 * weighted by each shard's scored rollouts; counts add up; per-task means are copied whole.
 */
export function mergeShardSummaries(batchId: string, shards: readonly RolloutSetSummary[]): RolloutSetSummary {
  const add = (into: Record<string, number>, from: Record<string, number>) => {
    for (const [key, n] of Object.entries(from)) into[key] = (into[key] ?? 0) + n;
    return into;
  };
  let rewardSum = 0;
  let scored = 0;
  for (const shard of shards) {
    const shardScored = shard.total - shard.unscored;
    if (shard.meanReward !== null && shardScored > 0) {
      rewardSum += shard.meanReward * shardScored;
      scored += shardScored;
    }
  }
  return {
    batchId,
    harnessVersion: shards[0]?.harnessVersion ?? '',
    total: shards.reduce((n, s) => n + s.total, 0),
    byStatus: shards.reduce((acc, s) => add(acc, s.byStatus), {}),
    byFailureClass: shards.reduce((acc, s) => add(acc, s.byFailureClass), {}),
    ...withReasons(firstShardReasons(shards)),
    meanReward: scored === 0 ? null : rewardSum / scored,
    unscored: shards.reduce((n, s) => n + s.unscored, 0),
    rewardDisagreements: shards.reduce((n, s) => n + s.rewardDisagreements, 0),
    meanRewardByTask: Object.assign({}, ...shards.map((s) => s.meanRewardByTask)) as Record<string, number>,
  };
}
