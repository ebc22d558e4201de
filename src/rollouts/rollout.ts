import { z } from 'zod';
import { FAILURE_CLASSES, UNSCORED_FAILURE_CLASSES, type FailureClass } from './failure-classes.js';
import { ROLLOUT_ID_PATTERN, ROLLOUT_ID_RULE } from './rollout-id.js';

import { ROLLOUT_MODES, ROLLOUT_STATUSES, type RolloutMode, type RolloutStatus } from './rollout-states.js';

export { ROLLOUT_MODES, ROLLOUT_STATUSES, type RolloutMode, type RolloutStatus } from './rollout-states.js';

// Why a rollout failed, whether it is scored and retried: one table (failure-classes.ts), read by all.
export { FAILURE_CLASSES, UNSCORED_FAILURE_CLASSES, type FailureClass } from './failure-classes.js';

/** Where a rollout may go from each status; finished rollouts go nowhere. */
const NEXT: Record<RolloutStatus, readonly RolloutStatus[]> = {
  queued: ['running', 'failed', 'cancelled'],
  running: ['succeeded', 'failed', 'cancelled'],
  succeeded: [],
  failed: [],
  cancelled: [],
};

export function canTransition(from: RolloutStatus, to: RolloutStatus): boolean {
  return NEXT[from].includes(to);
}

export function isFinished(status: RolloutStatus): boolean {
  return NEXT[status].length === 0;
}

/**
 * The custom event that says why an attempt ended without a result and another started (its data: attempt,
 * failureClass, reason).
 */
export const ATTEMPT_FAILED = 'attempt_failed';

/** Finished without a score: cancelled, or failed for a reason that is not the policy's. */
export function isUnscored(rollout: Pick<Rollout, 'status' | 'failureClass'>): boolean {
  return (
    rollout.status === 'cancelled' ||
    (rollout.status === 'failed' &&
      rollout.failureClass !== null &&
      UNSCORED_FAILURE_CLASSES.includes(rollout.failureClass))
  );
}

/**
 * The rollout metadata key holding its run's `samples.merge`: the gateway sends the continued chat
 * calls of a `tito` rollout token in.
 */
export const SAMPLES_MERGE = 'samplesMerge';

export interface Rollout {
  id: string;
  taskId: string | null;
  mode: RolloutMode;
  status: RolloutStatus;
  statusReason: string | null;
  /** Attempts started so far; attempt numbers run 1..attempts. */
  attempts: number;
  /** When true, calls on the path form need no key (an explicit, recorded choice). */
  keyless: boolean;
  /** When set, every call of the rollout goes to this policy version, whatever model the harness names. */
  policyVersion: string | null;
  failureClass: FailureClass | null;
  metadata: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

export const newRolloutSchema = z.strictObject({
  id: z.string().regex(ROLLOUT_ID_PATTERN, ROLLOUT_ID_RULE).optional(),
  taskId: z.string().min(1).max(512).optional(),
  mode: z.enum(ROLLOUT_MODES).default('train'),
  keyless: z.boolean().default(false),
  policyVersion: z.string().min(1).max(256).optional(),
  metadata: z.record(z.string(), z.unknown()).default({}),
});
export type NewRollout = z.input<typeof newRolloutSchema>;

export const statusChangeSchema = z
  .strictObject({
    status: z.enum(ROLLOUT_STATUSES),
    reason: z.string().max(4000).optional(),
    failureClass: z.enum(FAILURE_CLASSES).optional(),
    /** What the failure class was read from (exit code, log tail, a call or span id); kept on the status event. */
    evidence: z.record(z.string(), z.unknown()).optional(),
    /**
     * The attempt the change comes from; refused (409) if the rollout has started another since,
     * so a runner that lost its attempt (presumed dead, the attempt run again elsewhere) cannot
     * end the rollout its successor runs.
     */
    attempt: z.number().int().min(1).optional(),
  })
  .refine((c) => c.failureClass === undefined || c.status === 'failed', {
    message: 'failureClass goes with status "failed" only',
    path: ['failureClass'],
  });
export type StatusChange = z.input<typeof statusChangeSchema>;

const rewardEvent = z.strictObject({
  type: z.literal('reward'),
  /** The reward the rollout earns. */
  value: z.number().finite(),
  /** Named parts of the reward (task success, cost, ...), kept for attribution. */
  components: z.record(z.string(), z.number().finite()).default({}),
  data: z.record(z.string(), z.unknown()).optional(),
});

const spanEvent = z.strictObject({
  type: z.literal('span'),
  /** Stable across retries: appending the same action twice records it once. */
  actionId: z.string().min(1).max(256),
  name: z.string().min(1).max(256),
  kind: z.enum(['tool', 'action']).default('tool'),
  input: z.unknown().optional(),
  output: z.unknown().optional(),
  latencyMs: z.number().nonnegative().optional(),
  permission: z.enum(['allowed', 'denied', 'asked', 'not_applicable']).default('not_applicable'),
  failure: z.string().max(256).optional(),
  /** The action cannot be undone; when it failed, the rollout's failure class is `irreversible`. */
  irreversible: z.boolean().optional(),
});

/** A person stepped in (approved, corrected, took over); counted in the ledgers. */
const interventionEvent = z.strictObject({
  type: z.literal('intervention'),
  reason: z.string().min(1).max(4000),
  by: z.string().max(256).optional(),
  data: z.record(z.string(), z.unknown()).optional(),
});

const customEvent = z.strictObject({
  type: z.literal('custom'),
  name: z.string().min(1).max(256),
  data: z.unknown().optional(),
});

export const newEventSchema = z.discriminatedUnion('type', [rewardEvent, spanEvent, customEvent, interventionEvent]);
export type NewEvent = z.output<typeof newEventSchema>;
export type NewEventInput = z.input<typeof newEventSchema>;

export interface RolloutEvent {
  id: number;
  rolloutId: string;
  attempt: number;
  type: NewEvent['type'] | 'status';
  /** Who appended it: the rollout's own key, or the admin (control plane, verifier). */
  source: 'rollout' | 'admin' | 'gateway';
  actionId: string | null;
  payload: Record<string, unknown>;
  at: string;
}
