import { isFinished, type Rollout } from '../rollouts/rollout.js';
import type { RolloutKeyClaim } from './keys.js';
import { GatewayHttpError } from './errors.js';

/**
 * Refuses a rollout key whose attempt may no longer write: its rollout finished, or its attempt
 * was superseded by a newer one (or never started). One rule for model calls and events alike,
 * so a harness left running from an earlier attempt can add nothing the ledgers would count.
 */
export function refuseClosedAttempt(
  rollout: Pick<Rollout, 'id' | 'status' | 'attempts'>,
  claim: RolloutKeyClaim,
): void {
  if (isFinished(rollout.status)) {
    throw new GatewayHttpError(
      409,
      'rollout_finished',
      `rollout ${rollout.id} has finished (${rollout.status}); it takes no more calls or events`,
    );
  }
  refuseSupersededAttempt(rollout, claim.attempt);
}

/**
 * Refuses a write for an attempt other than the rollout's current one: a newer attempt superseded
 * it (a harness, or a runner presumed dead, left over), or it never started.
 */
export function refuseSupersededAttempt(rollout: Pick<Rollout, 'id' | 'attempts'>, attempt: number): void {
  if (attempt > rollout.attempts) {
    throw new GatewayHttpError(404, 'attempt_not_found', `rollout ${rollout.id} has no attempt ${attempt}`);
  }
  if (attempt < rollout.attempts) {
    throw new GatewayHttpError(
      409,
      'attempt_superseded',
      `attempt ${attempt} of rollout ${rollout.id} was superseded by attempt ${rollout.attempts}`,
    );
  }
}
