/**
 * Loss normalization folded into one weight per trained token, so that any trainer minimises
 * Σ_t w_t · ℓ_t and gets the aggregation chosen here, whatever it does itself. Within a sequence
 * every trained token has the same weight, so weights are returned per sequence.
 *
 * With S sequences that have trained tokens, T_s trained tokens in sequence s, T in all, R
 * rollouts with T_r trained tokens each, and C a constant:
 * - token-mean:              Σ ℓ / T
 * - seq-mean-token-sum:      (1/S) Σ_s Σ_{t∈s} ℓ
 * - seq-mean-token-mean:     (1/S) Σ_s (1/T_s) Σ_{t∈s} ℓ
 * - seq-mean-token-sum-norm: (1/S) Σ_s (1/C) Σ_{t∈s} ℓ   (Dr. GRPO: C is the max response length)
 * - rollout-mean:            (1/R) Σ_r (1/T_r) Σ_{t∈r} ℓ   (every rollout weighs the same, however
 *                            many sequences or tokens it has: Agent Lightning's per-rollout mean)
 */
export const LOSS_AGGREGATIONS = [
  'token-mean',
  'seq-mean-token-sum',
  'seq-mean-token-mean',
  'seq-mean-token-sum-norm',
  'rollout-mean',
] as const;
export type LossAggregation = (typeof LOSS_AGGREGATIONS)[number];

export interface SequenceShape {
  rolloutId: string;
  trainedTokens: number;
}

export function sequenceWeights(
  sequences: readonly SequenceShape[],
  aggregation: LossAggregation,
  options: { normConstant?: number } = {},
): number[] {
  const trained = sequences.filter((s) => s.trainedTokens > 0);
  const S = trained.length;
  const T = trained.reduce((sum, s) => sum + s.trainedTokens, 0);
  const tokensOfRollout = new Map<string, number>();
  for (const s of trained) tokensOfRollout.set(s.rolloutId, (tokensOfRollout.get(s.rolloutId) ?? 0) + s.trainedTokens);
  const R = tokensOfRollout.size;
  if (aggregation === 'seq-mean-token-sum-norm' && !(options.normConstant && options.normConstant > 0)) {
    throw new Error('seq-mean-token-sum-norm needs a positive normConstant (e.g. the max response length)');
  }
  return sequences.map((s) => {
    if (s.trainedTokens === 0) return 0;
    switch (aggregation) {
      case 'token-mean':
        return 1 / T;
      case 'seq-mean-token-sum':
        return 1 / S;
      case 'seq-mean-token-mean':
        return 1 / (S * s.trainedTokens);
      case 'seq-mean-token-sum-norm':
        return 1 / (S * (options.normConstant as number));
      case 'rollout-mean':
        return 1 / (R * (tokensOfRollout.get(s.rolloutId) as number));
    }
  });
}
