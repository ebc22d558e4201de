import { proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { RunRolloutsInput, RunRolloutsSummary } from '../activities/run-rollouts.js';
import { ReinPolicyVersion, ReinStage } from './search-attributes.js';

export interface RolloutSetInput extends RunRolloutsInput {
  /** How long a worker may go silent before the set moves to another worker. */
  heartbeatTimeoutSeconds?: number;
  timeoutMinutes?: number;
}

/** One set of rollouts (train, eval or shadow) as its own workflow: the first stage of an iteration, or a replay. */
export async function rolloutSet(input: RolloutSetInput): Promise<RunRolloutsSummary> {
  const { heartbeatTimeoutSeconds = 60, timeoutMinutes = 240, ...rollouts } = input;
  const { runRollouts } = proxyActivities<Activities>({
    startToCloseTimeout: `${timeoutMinutes} minutes`,
    heartbeatTimeout: `${heartbeatTimeoutSeconds} seconds`,
    retry: { maximumAttempts: 5, nonRetryableErrorTypes: ['RolloutSetupError', 'TaskSetChanged', 'UnknownTask'] },
    summary: `${rollouts.mode} rollouts: ${rollouts.taskIds.length} tasks x ${rollouts.samplesPerTask}`,
  });
  upsertSearchAttributes([
    { key: ReinStage, value: 'rollouts' },
    ...(rollouts.policyVersion !== null ? [{ key: ReinPolicyVersion, value: rollouts.policyVersion }] : []),
  ]);
  const summary = await runRollouts(rollouts);
  upsertSearchAttributes([{ key: ReinStage, value: 'rollouts-done' }]);
  return summary;
}
