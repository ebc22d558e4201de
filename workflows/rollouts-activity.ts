import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { RunRolloutsInput, RunRolloutsSummary } from '../activities/run-rollouts.js';
import { DEFAULT_SHARD_SETTINGS, type ShardSettings } from '../src/rollouts/shards.js';
import { callOptions, ROLLOUT_ACTIVITY } from './activity-options.js';
import { runsInShards, shardedRollouts } from './rollout-shards.js';
import type { HeldoutSelection } from './task-selection.js';

const { runRollouts } = proxyActivities<Activities>(ROLLOUT_ACTIVITY);

/**
 * One set of rollouts as an activity, with the run's heartbeat timeout and a summary for the Web
 * UI; `timeoutMinutes` bounds it instead of ROLLOUT_ACTIVITY's start-to-close.
 */
export function rolloutSetActivity(
  summary: string,
  heartbeatTimeoutSeconds: number | undefined,
  input: RunRolloutsInput,
  timeoutMinutes?: number,
): Promise<RunRolloutsSummary> {
  const options = {
    ...callOptions(heartbeatTimeoutSeconds, summary),
    ...(timeoutMinutes !== undefined && { startToCloseTimeout: `${timeoutMinutes} minutes` }),
  };
  return runRollouts.executeWithOptions(options, [input]);
}

/** Extra rounds for rollouts a fault left unscored, each after a longer pause (10 s, 20 s). */
const RESCORE_ROUNDS = 2;

/**
 * Runs a set of rollouts, then runs its unscored ones (lost to a fault) again before anything is
 * computed from it: a verdict or a batch must rest on scored rollouts, and a short outage should
 * cost a pause, not the evidence. What is still unscored after the last round is reported as such.
 * A set larger than one shard runs as shards on any workers (rollout-shards.ts), and only the
 * shards with unscored rollouts run again; a smaller one is one activity, as it always was.
 */
export async function scoredRollouts(
  summary: string,
  heartbeatTimeoutSeconds: number | undefined,
  input: RunRolloutsInput,
  shards: ShardSettings = DEFAULT_SHARD_SETTINGS,
  timeoutMinutes?: number,
): Promise<RunRolloutsSummary> {
  if (runsInShards(input, shards)) {
    const options = { summary, heartbeatTimeoutSeconds, settings: shards, rescoreRounds: RESCORE_ROUNDS };
    return shardedRollouts(input, { ...options, ...(timeoutMinutes !== undefined && { timeoutMinutes }) });
  }
  let result = await rolloutSetActivity(summary, heartbeatTimeoutSeconds, input, timeoutMinutes);
  for (let round = 1; round <= RESCORE_ROUNDS && result.unscored > 0; round++) {
    await sleep(`${10 * round} seconds`);
    result = await rolloutSetActivity(summary, heartbeatTimeoutSeconds, input, timeoutMinutes);
  }
  return result;
}

/**
 * A held-out replay: each held-out task `samplesPerTask` times on one policy version, with the
 * harness's eval settings, into `batchId` (the batch a gate against that version reads).
 */
export function heldoutReplay(
  replay: {
    heldout: HeldoutSelection;
    samplesPerTask: number;
    policyVersion: string;
    batchId: string;
    configHash: string;
  },
  heartbeatTimeoutSeconds: number | undefined,
  shards?: ShardSettings,
): Promise<RunRolloutsSummary> {
  const { heldout, samplesPerTask, policyVersion } = replay;
  return scoredRollouts(
    `held-out replay: ${heldout.taskIds.length} tasks x ${samplesPerTask} on ${policyVersion}`,
    heartbeatTimeoutSeconds,
    {
      batchId: replay.batchId,
      configHash: replay.configHash,
      taskSet: heldout.taskSet,
      taskIds: heldout.taskIds,
      samplesPerTask,
      mode: 'eval',
      policyVersion,
      ...(heldout.harnessEnv && { harnessEnv: heldout.harnessEnv }),
    },
    shards,
  );
}
