import type { RolloutEvent } from './rollout.js';

/** Rewards closer than this agree (they are floats that went through JSON). */
const AGREEMENT = 1e-6;

/**
 * The rollout's rewards as recorded: the verifier's (appended by the control plane) and the one
 * the harness reported itself with its own key. Only the verifier's is trained on; the harness's
 * is kept to compare, since an agent that grades itself is not to be trusted.
 */
export function recordedRewards(events: readonly Pick<RolloutEvent, 'type' | 'source' | 'payload'>[]): {
  verified: number | undefined;
  reported: number | undefined;
  disagrees: boolean;
} {
  const latest = (source: RolloutEvent['source']) => {
    const value = events.filter((e) => e.type === 'reward' && e.source === source).at(-1)?.payload.value;
    return typeof value === 'number' ? value : undefined;
  };
  const verified = latest('admin');
  const reported = latest('rollout');
  return {
    verified,
    reported,
    disagrees: verified !== undefined && reported !== undefined && rewardsDisagree(verified, reported),
  };
}

export function rewardsDisagree(verified: number, reported: number): boolean {
  return Math.abs(verified - reported) > AGREEMENT;
}
