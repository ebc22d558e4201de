import { upsertSearchAttributes } from '@temporalio/workflow';
import type { RunRolloutsInput, RunRolloutsSummary } from '../activities/run-rollouts.js';
import { DEFAULT_SHARD_SETTINGS, type ShardSettings } from '../src/rollouts/shards.js';
import { rolloutSetActivity, scoredRollouts } from './rollouts-activity.js';
import { runsInShards, shardedRollouts } from './rollout-shards.js';
import { ReinPolicyVersion, ReinStage } from './search-attributes.js';
import type { TrainSelection } from './task-selection.js';

export interface RolloutSetInput extends RunRolloutsInput {
  /** How long a worker may go silent before its shard moves to another worker. */
  heartbeatTimeoutSeconds?: number;
  /** Bounds each activity of the set (the whole set when it is one shard). */
  timeoutMinutes?: number;
  /** How the set is split over workers (the config's rollouts.shard); default: DEFAULT_SHARD_SETTINGS. */
  shards?: ShardSettings;
  /**
   * Run unscored rollouts again before returning, as an iteration does before it builds a batch
   * (see scoredRollouts); default: report them unscored.
   */
  rescore?: boolean;
}

/** An iteration's training set: its tasks × samples pinned to the policy they sample, into its batch. */
export function trainingSet(
  batchId: string,
  configHash: string,
  train: TrainSelection,
  policyVersion: string,
): RunRolloutsInput {
  const { taskSet, taskIds, samplesPerTask, variants } = train;
  return {
    batchId,
    configHash,
    taskSet,
    taskIds,
    samplesPerTask,
    mode: 'train',
    policyVersion,
    ...(variants && variants.length > 0 && { variants }),
  };
}

/**
 * One set of rollouts (train, eval or shadow) as its own workflow: an iteration's training set, or
 * a replay. A set larger than one shard fans out over the task queue (rollout-shards.ts).
 */
export async function rolloutSet(input: RolloutSetInput): Promise<RunRolloutsSummary> {
  const { heartbeatTimeoutSeconds, timeoutMinutes, shards = DEFAULT_SHARD_SETTINGS, rescore, ...rollouts } = input;
  upsertSearchAttributes([
    { key: ReinStage, value: 'rollouts' },
    ...(rollouts.policyVersion !== null ? [{ key: ReinPolicyVersion, value: rollouts.policyVersion }] : []),
  ]);
  const summary = `${rollouts.mode} rollouts: ${rollouts.taskIds.length} tasks x ${rollouts.samplesPerTask}`;
  let result: RunRolloutsSummary;
  if (rescore) {
    result = await scoredRollouts(summary, heartbeatTimeoutSeconds, rollouts, shards, timeoutMinutes);
  } else if (runsInShards(rollouts, shards)) {
    result = await shardedRollouts(rollouts, {
      summary,
      heartbeatTimeoutSeconds,
      settings: shards,
      rescoreRounds: 0,
      ...(timeoutMinutes !== undefined && { timeoutMinutes }),
    });
  } else {
    result = await rolloutSetActivity(summary, heartbeatTimeoutSeconds, rollouts, timeoutMinutes);
  }
  upsertSearchAttributes([{ key: ReinStage, value: 'rollouts-done' }]);
  return result;
}
