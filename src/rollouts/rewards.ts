import type { RolloutEvent } from './rollout.js';

/** Rewards closer than this agree (they are floats that went through JSON). */
const AGREEMENT = 1e-6;

type RecordedEvent = Pick<RolloutEvent, 'type' | 'source' | 'attempt' | 'payload'>;

/**
 * The attempt a rollout's events end in: its last one (a finished rollout's status event carries its final attempt).
 */
export function lastAttemptOf(events: readonly Pick<RolloutEvent, 'attempt'>[]): number {
  return events.reduce((last, e) => Math.max(last, e.attempt), 0);
}

/**
 * The verifier's reward event of the attempt (by default the rollout's last): the first one recorded, which holds the
 * attempt's slot in the store (journals from before it kept one per attempt may hold more, as evidence).
 */
export function verifiedRewardEvent<E extends RecordedEvent>(
  events: readonly E[],
  attempt = lastAttemptOf(events),
): E | undefined {
  return events.find((e) => e.type === 'reward' && e.source === 'admin' && e.attempt === attempt);
}

/**
 * The rollout's rewards as recorded for its final attempt (`attempt`, by default the last its events name; callers
 * holding the rollout pass its `attempts`): the verifier's (appended by the control plane) and the harness's latest,
 * which it reported itself with its own key. Only the verifier's is trained on; the harness's is kept to compare,
 * since an agent that grades itself is not to be trusted. An earlier attempt's rewards never count: that attempt
 * was superseded.
 */
export function recordedRewards(
  events: readonly RecordedEvent[],
  attempt = lastAttemptOf(events),
): {
  verified: number | undefined;
  reported: number | undefined;
  disagrees: boolean;
} {
  const valueOf = (event: RecordedEvent | undefined) =>
    typeof event?.payload.value === 'number' ? event.payload.value : undefined;
  const verified = valueOf(verifiedRewardEvent(events, attempt));
  const reported = valueOf(
    events.filter((e) => e.type === 'reward' && e.source === 'rollout' && e.attempt === attempt).at(-1),
  );
  return {
    verified,
    reported,
    disagrees: verified !== undefined && reported !== undefined && rewardsDisagree(verified, reported),
  };
}

export function rewardsDisagree(verified: number, reported: number): boolean {
  return Math.abs(verified - reported) > AGREEMENT;
}
