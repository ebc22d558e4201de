import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { RunRolloutsInput, RunRolloutsSummary } from '../activities/run-rollouts.js';

/** The rollouts stage, with the timeouts and retries every set of rollouts gets. */
export const rolloutsActivity = (summary: string, heartbeatTimeoutSeconds = 60) =>
  proxyActivities<Activities>({
    startToCloseTimeout: '4 hours',
    heartbeatTimeout: `${heartbeatTimeoutSeconds} seconds`,
    // Ten attempts back off (1 s doubling, at most 100 s) over about 5.5 minutes: a gateway or
    // disk that is back within that loses no set; the pending attempt's failure shows in `rein status`.
    retry: { maximumAttempts: 10, maximumInterval: '100 seconds', nonRetryableErrorTypes: ['RolloutSetupError', 'TaskSetChanged', 'UnknownTask'] },
    summary,
  }).runRollouts;

/** Extra rounds for rollouts a fault left unscored, each after a longer pause (10 s, 20 s). */
const RESCORE_ROUNDS = 2;

/**
 * Runs a set of rollouts, then runs its unscored ones (lost to a fault) again before anything is
 * computed from it: a verdict or a batch must rest on scored rollouts, and a short outage should
 * cost a pause, not the evidence. What is still unscored after the last round is reported as such.
 */
export async function scoredRollouts(summary: string, heartbeatTimeoutSeconds: number | undefined, input: RunRolloutsInput): Promise<RunRolloutsSummary> {
  const run = rolloutsActivity(summary, heartbeatTimeoutSeconds);
  let result = await run(input);
  // Results recorded before `unscored` existed have none: they replay exactly as they ran.
  for (let round = 1; round <= RESCORE_ROUNDS && (result.unscored ?? 0) > 0; round++) {
    await sleep(`${10 * round} seconds`);
    result = await run(input);
  }
  return result;
}
