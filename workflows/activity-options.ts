import type { ActivityOptions, RetryPolicy } from '@temporalio/common';
import {
  DataQualityFailure,
  GateInputFailure,
  LedgerFailure,
  PolicyUpdateFailure,
  PromotionFailure,
  RolloutSetupFailure,
  ShadowSetupFailure,
  TaskSetChangedFailure,
  typesOf,
  UnknownTaskFailure,
  WebhookSetupFailure,
  ACTIVITY_NOT_REGISTERED,
} from './failures.js';

/**
 * How long each kind of work may take and how Temporal retries it: one named policy per kind,
 * which every workflow that schedules that work uses. A failure listed as non-retryable is one
 * that a retry cannot mend (a wrong setup or input); anything else is retried with backoff.
 */

/**
 * Rollouts: ten attempts back off (1 s doubling, at most 100 s) over about 5.5 minutes, so a
 * gateway or disk that is back within that loses no set (a retry resumes the set: finished
 * rollouts are read back); the pending attempt's failure shows in `rein status`.
 */
export const ROLLOUT_RETRY: RetryPolicy = {
  maximumAttempts: 10,
  maximumInterval: '100 seconds',
  nonRetryableErrorTypes: typesOf(RolloutSetupFailure, TaskSetChangedFailure, UnknownTaskFailure),
};

/** The batch: a crash or a lost worker is tried again; a data-quality refusal is the batch's verdict. */
export const BATCH_RETRY: RetryPolicy = { maximumAttempts: 3, nonRetryableErrorTypes: typesOf(DataQualityFailure) };

/** The policy update: a killed trainer is tried again (it reuses a finished result); a wrong setup is not. */
export const TRAINER_RETRY: RetryPolicy = { maximumAttempts: 3, nonRetryableErrorTypes: typesOf(PolicyUpdateFailure) };

/** Short steps against the registry, the gate, the ledgers and the gateway's mirrors. */
export const REGISTRY_RETRY: RetryPolicy = {
  maximumAttempts: 5,
  nonRetryableErrorTypes: typesOf(
    PolicyUpdateFailure,
    PromotionFailure,
    GateInputFailure,
    LedgerFailure,
    ShadowSetupFailure,
  ),
};

/** The run's environment variants: planned and judged from the store; a variant that cannot be made is final. */
export const ENVIRONMENT_RETRY: RetryPolicy = {
  maximumAttempts: 3,
  nonRetryableErrorTypes: typesOf(RolloutSetupFailure),
};

/**
 * Webhook notifications: the webhook's own retries, 1 s doubling to 30 s, six tries (about a
 * minute in all). A worker without the activity (an older one, a test's stubs) refuses at once.
 */
export const NOTIFY_RETRY: RetryPolicy = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '30 seconds',
  maximumAttempts: 6,
  nonRetryableErrorTypes: [...typesOf(WebhookSetupFailure), ACTIVITY_NOT_REGISTERED],
};

/** The worker host check: a few tries, then the preflight fails. */
export const HOST_CHECK_RETRY: RetryPolicy = { maximumAttempts: 3 };

// Start-to-close bounds a stage; the heartbeat timeout (per call: callOptions) hands a dead
// worker's stage to another worker soon.
export const ROLLOUT_ACTIVITY: ActivityOptions = { startToCloseTimeout: '4 hours', retry: ROLLOUT_RETRY };
export const BATCH_ACTIVITY: ActivityOptions = { startToCloseTimeout: '30 minutes', retry: BATCH_RETRY };
export const TRAINER_ACTIVITY: ActivityOptions = { startToCloseTimeout: '6 hours', retry: TRAINER_RETRY };
export const REGISTRY_ACTIVITY: ActivityOptions = { startToCloseTimeout: '5 minutes', retry: REGISTRY_RETRY };
export const ENVIRONMENT_ACTIVITY: ActivityOptions = { startToCloseTimeout: '10 minutes', retry: ENVIRONMENT_RETRY };
export const NOTIFY_ACTIVITY: ActivityOptions = {
  startToCloseTimeout: '1 minute',
  retry: NOTIFY_RETRY,
  summary: 'notify webhook',
};
export const HOST_CHECK_ACTIVITY: ActivityOptions = {
  startToCloseTimeout: '1 minute',
  retry: HOST_CHECK_RETRY,
  summary: 'check the worker host',
};

/** How long a worker may go silent in a stage before it moves to another worker, unless the run says. */
export const DEFAULT_HEARTBEAT_TIMEOUT_SECONDS = 60;

/** The options of one call: the run's heartbeat timeout and what the Web UI shows for it. */
export function callOptions(heartbeatTimeoutSeconds: number | undefined, summary?: string): ActivityOptions {
  return {
    heartbeatTimeout: `${heartbeatTimeoutSeconds ?? DEFAULT_HEARTBEAT_TIMEOUT_SECONDS} seconds`,
    ...(summary !== undefined && { summary }),
  };
}
