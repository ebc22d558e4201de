import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

/** The rollouts stage, with the timeouts and retries every set of rollouts gets. */
export const rolloutsActivity = (summary: string, heartbeatTimeoutSeconds = 60) =>
  proxyActivities<Activities>({
    startToCloseTimeout: '4 hours',
    heartbeatTimeout: `${heartbeatTimeoutSeconds} seconds`,
    retry: { maximumAttempts: 5, nonRetryableErrorTypes: ['RolloutSetupError', 'TaskSetChanged', 'UnknownTask'] },
    summary,
  }).runRollouts;
