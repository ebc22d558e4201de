/**
 * Group-relative advantages, computed once per rollout and later broadcast to its trained tokens.
 * A group is the n rollouts of one task (a GRPO group).
 *
 * - grpo:     (r − mean_g) / (std_g + ε), std the sample standard deviation (n − 1), as verl does.
 * - dr_grpo:  r − mean_g (no division by the std: Dr. GRPO).
 * - rloo:     r − mean of the other rollouts of the group (leave-one-out baseline).
 * - reinforce_pp_baseline: r − mean_g, then whitened over the batch's trained tokens
 *             (token-weighted mean and sample std), as REINFORCE++ with a group baseline.
 *
 * Groups whose rewards are all equal (including groups of one) carry no signal for a
 * group-relative estimator: they are dropped, or kept with what the formula gives (0 before any
 * batch whitening).
 */
export const ADVANTAGE_ESTIMATORS = ['grpo', 'dr_grpo', 'rloo', 'reinforce_pp_baseline'] as const;
export type AdvantageEstimator = (typeof ADVANTAGE_ESTIMATORS)[number];

export interface ScoredRollout {
  rolloutId: string;
  /** Rollouts of the same task (and seed set) share a group. */
  groupId: string;
  reward: number;
  /** Trained (loss-mask 1) tokens, for token-weighted batch whitening. */
  trainedTokens: number;
}

export interface AdvantageOptions {
  estimator: AdvantageEstimator;
  epsilon?: number;
  zeroVarianceGroups?: 'drop' | 'keep';
}

export interface Advantages {
  /** Advantage of every rollout that is trained on. */
  byRollout: Map<string, number>;
  /** Rollouts left out, with the reason. */
  dropped: Map<string, 'zero_variance_group'>;
  zeroVarianceGroupIds: string[];
}

/** Rewards closer than this count as equal. */
const EQUAL_REWARDS = 1e-9;

export function computeAdvantages(rollouts: readonly ScoredRollout[], options: AdvantageOptions): Advantages {
  const epsilon = options.epsilon ?? 1e-6;
  const groups = new Map<string, ScoredRollout[]>();
  for (const rollout of rollouts) {
    const group = groups.get(rollout.groupId);
    if (group) group.push(rollout);
    else groups.set(rollout.groupId, [rollout]);
  }

  const byRollout = new Map<string, number>();
  const dropped = new Map<string, 'zero_variance_group'>();
  const zeroVarianceGroupIds: string[] = [];
  for (const [groupId, members] of groups) {
    const rewards = members.map((m) => m.reward);
    const flat = Math.max(...rewards) - Math.min(...rewards) <= EQUAL_REWARDS;
    if (flat) {
      zeroVarianceGroupIds.push(groupId);
      if ((options.zeroVarianceGroups ?? 'drop') === 'drop') {
        for (const m of members) dropped.set(m.rolloutId, 'zero_variance_group');
        continue;
      }
    }
    const n = members.length;
    const mean = rewards.reduce((a, b) => a + b, 0) / n;
    const std = n > 1 ? Math.sqrt(rewards.reduce((s, r) => s + (r - mean) ** 2, 0) / (n - 1)) : 0;
    for (const m of members) {
      const centred = flat ? 0 : m.reward - mean;
      let advantage: number;
      switch (options.estimator) {
        case 'grpo':
          advantage = centred / (std + epsilon);
          break;
        case 'rloo':
          advantage = n > 1 ? (centred * n) / (n - 1) : 0;
          break;
        case 'dr_grpo':
        case 'reinforce_pp_baseline':
          advantage = centred;
          break;
      }
      byRollout.set(m.rolloutId, advantage);
    }
  }

  if (options.estimator === 'reinforce_pp_baseline') whitenByTokens(rollouts, byRollout, epsilon);
  return { byRollout, dropped, zeroVarianceGroupIds };
}

/** Batch normalization of the advantages over trained tokens (each rollout counts once per token). */
function whitenByTokens(rollouts: readonly ScoredRollout[], byRollout: Map<string, number>, epsilon: number): void {
  const kept = rollouts.filter((r) => byRollout.has(r.rolloutId) && r.trainedTokens > 0);
  const tokens = kept.reduce((s, r) => s + r.trainedTokens, 0);
  if (tokens < 2) return;
  const mean = kept.reduce((s, r) => s + r.trainedTokens * (byRollout.get(r.rolloutId) as number), 0) / tokens;
  const variance =
    kept.reduce((s, r) => s + r.trainedTokens * ((byRollout.get(r.rolloutId) as number) - mean) ** 2, 0) / (tokens - 1);
  const std = Math.sqrt(variance);
  for (const [id, advantage] of byRollout) byRollout.set(id, (advantage - mean) / (std + epsilon));
}
