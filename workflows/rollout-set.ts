import { upsertSearchAttributes } from '@temporalio/workflow';
import type { RunRolloutsInput, RunRolloutsSummary } from '../activities/run-rollouts.js';
import { rolloutSetActivity } from './rollouts-activity.js';
import { ReinPolicyVersion, ReinStage } from './search-attributes.js';

export interface RolloutSetInput extends RunRolloutsInput {
  /** How long a worker may go silent before the set moves to another worker. */
  heartbeatTimeoutSeconds?: number;
  timeoutMinutes?: number;
}

/** One set of rollouts (train, eval or shadow) as its own workflow: the first stage of an iteration, or a replay. */
export async function rolloutSet(input: RolloutSetInput): Promise<RunRolloutsSummary> {
  const { heartbeatTimeoutSeconds, timeoutMinutes, ...rollouts } = input;
  upsertSearchAttributes([
    { key: ReinStage, value: 'rollouts' },
    ...(rollouts.policyVersion !== null ? [{ key: ReinPolicyVersion, value: rollouts.policyVersion }] : []),
  ]);
  const summary = `${rollouts.mode} rollouts: ${rollouts.taskIds.length} tasks x ${rollouts.samplesPerTask}`;
  const result = await rolloutSetActivity(summary, heartbeatTimeoutSeconds, rollouts, timeoutMinutes);
  upsertSearchAttributes([{ key: ReinStage, value: 'rollouts-done' }]);
  return result;
}
