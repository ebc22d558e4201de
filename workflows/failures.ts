import { ApplicationFailure } from '@temporalio/common';

/**
 * Every failure Rein sends through Temporal, as a class with its Temporal `type`: activities and
 * workflows throw these, and retry policies (activity-options.ts) name them by the same `type`.
 * Across the Temporal boundary a failure arrives as a plain ApplicationFailure carrying only its
 * `type`: compare types there, never classes.
 *
 * Pure code (no I/O): workflows import it as they import @temporalio/common.
 */
function failureType<const T extends string>(type: T, retryable: boolean) {
  return class extends ApplicationFailure {
    static readonly type: T = type;
    constructor(message: string, details?: Record<string, unknown>) {
      super(message, type, !retryable, details === undefined ? undefined : [details]);
    }
  };
}

// The table: class, its Temporal type, and whether Temporal may retry it.

/** The worker cannot run rollouts: its config lacks a gateway key, harness or verifier, or the harness is wrong. */
export class RolloutSetupFailure extends failureType('RolloutSetupError', false) {}
/** A run's config cannot be loaded by its hash (not in the artifact store, changed, another version's). */
export class RunConfigFailure extends failureType('RunConfigError', false) {}
/** A task set changed since the run pinned its hash. */
export class TaskSetChangedFailure extends failureType('TaskSetChanged', false) {}
/** A task id the task set does not have. */
export class UnknownTaskFailure extends failureType('UnknownTask', false) {}
/** The worker is going away mid-set: another worker resumes the set. */
export class RolloutsHandedBackFailure extends failureType('RolloutsHandedBack', true) {}
/** The batch failed its data-quality checks (details: problems, reportUri). */
export class DataQualityFailure extends failureType('DataQualityError', false) {}
/**
 * The update cannot be done as set up (no registry, trainer or serving; a refused trainer input; a version conflict).
 */
export class PolicyUpdateFailure extends failureType('PolicyUpdateError', false) {}
/** A trainer that crashed or was killed, or a backend that would not load the version: tried again. */
export class PolicyUpdateRetryFailure extends failureType('PolicyUpdateFailed', true) {}
/** A promotion the registry refuses, or a candidate that is not registered or already production. */
export class PromotionFailure extends failureType('PromotionError', false) {}
/** The gate cannot judge these replays (e.g. they do not pair). */
export class GateInputFailure extends failureType('GateInputError', false) {}
/** The worker has no ledger, harness or verifier to record a ledger row with. */
export class LedgerFailure extends failureType('LedgerError', false) {}
/** A gateway mirror cannot be set (no admin key, the alias is mirrored already, the candidate is not served). */
export class ShadowSetupFailure extends failureType('ShadowSetupError', false) {}
/** The webhook's config is wrong (its key file is missing, ...). */
export class WebhookSetupFailure extends failureType('WebhookSetupError', false) {}
/** The webhook did not take the notification: tried again with backoff. */
export class WebhookDeliveryFailure extends failureType('WebhookDeliveryFailed', true) {}
/** dataDir is below its free-space floor: retried, since freeing space is the fix. */
export class DiskSpaceFailure extends failureType('DiskSpaceError', true) {}
/** An iteration of a run failed for good (after its tries); the run ends with it. */
export class IterationFailure extends failureType('IterationFailed', false) {}

/** The type the Temporal SDK gives an activity the worker does not register (an older worker, a test's stubs). */
export const ACTIVITY_NOT_REGISTERED = 'NotFoundError';

/** A failure class of the table above (anything with a static Temporal `type`). */
export interface FailureClass {
  readonly type: string;
}

/** The Temporal types of failure classes, for a retry policy's nonRetryableErrorTypes. */
export function typesOf(...classes: FailureClass[]): string[] {
  return classes.map((c) => c.type);
}

/** The message of a failure's innermost cause: what went wrong, without the layers that carried it. */
export function rootMessage(err: unknown): string {
  let e: unknown = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
