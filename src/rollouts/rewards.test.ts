import { describe, expect, it } from 'vitest';
import { recordedRewards, verifiedRewardEvent } from './rewards.js';
import type { RolloutEvent } from './rollout.js';

type Recorded = Pick<RolloutEvent, 'type' | 'source' | 'attempt' | 'payload'>;
const reward = (attempt: number, value: number, source: RolloutEvent['source'] = 'admin'): Recorded => ({
  type: 'reward',
  source,
  attempt,
  payload: { value },
});
const status = (attempt: number): Recorded => ({ type: 'status', source: 'admin', attempt, payload: {} });

describe("the rollout's recorded rewards", () => {
  it("are the final attempt's: a superseded attempt's reward never counts", () => {
    // Attempt 1 scored by a runner presumed dead, attempt 2 scored by the one that took over.
    expect(recordedRewards([reward(1, 1), reward(1, 1, 'rollout'), reward(2, 0.5), reward(2, 0, 'rollout')])).toEqual({
      verified: 0.5,
      reported: 0,
      disagrees: true,
    });
    // Attempt 2 ended unscored (its status event says so): the rollout has no reward.
    expect(recordedRewards([reward(1, 1), reward(1, 1, 'rollout'), status(2)])).toEqual({
      verified: undefined,
      reported: undefined,
      disagrees: false,
    });
    // Whoever holds the rollout names its final attempt.
    expect(recordedRewards([reward(1, 1), reward(2, 0.5)], 1).verified).toBe(1);
  });

  it("take the verifier's first reward of the attempt, which holds its slot in the store, and the harness's latest", () => {
    const events = [reward(1, 0.2), reward(1, 1, 'rollout'), reward(1, 0.9), reward(1, 0.2, 'rollout')];
    expect(recordedRewards(events)).toEqual({ verified: 0.2, reported: 0.2, disagrees: false });
    expect(verifiedRewardEvent(events)).toBe(events[0]);
    expect(verifiedRewardEvent([reward(1, 1, 'rollout')])).toBeUndefined();
  });
});
