import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LOSS_AGGREGATIONS, sequenceWeights, type LossAggregation } from './loss-weights.js';

interface Sequence {
  rolloutId: string;
  losses: number[];
}

/** Each aggregation written out directly from its definition. */
function reference(sequences: Sequence[], aggregation: LossAggregation, C: number): number {
  const trained = sequences.filter((s) => s.losses.length > 0);
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const mean = (xs: number[]) => sum(xs) / xs.length;
  switch (aggregation) {
    case 'token-mean':
      return sum(trained.flatMap((s) => s.losses)) / trained.reduce((n, s) => n + s.losses.length, 0);
    case 'seq-mean-token-sum':
      return mean(trained.map((s) => sum(s.losses)));
    case 'seq-mean-token-mean':
      return mean(trained.map((s) => mean(s.losses)));
    case 'seq-mean-token-sum-norm':
      return mean(trained.map((s) => sum(s.losses) / C));
    case 'rollout-mean': {
      const byRollout = new Map<string, number[]>();
      for (const s of trained) byRollout.set(s.rolloutId, [...(byRollout.get(s.rolloutId) ?? []), ...s.losses]);
      return mean([...byRollout.values()].map(mean));
    }
  }
}

const sequences = fc
  .array(
    fc.record({
      rolloutId: fc.constantFrom('r1', 'r2', 'r3', 'r4'),
      losses: fc.array(fc.double({ min: -5, max: 5, noNaN: true }), { maxLength: 40 }),
    }),
    { minLength: 1, maxLength: 12 },
  )
  .filter((seqs) => seqs.some((s) => s.losses.length > 0));

describe('sequenceWeights', () => {
  it.each(LOSS_AGGREGATIONS)('Σ w_t ℓ_t equals the %s formula for any losses', (aggregation) => {
    fc.assert(
      fc.property(sequences, fc.integer({ min: 1, max: 4096 }), (seqs, C) => {
        const weights = sequenceWeights(
          seqs.map((s) => ({ rolloutId: s.rolloutId, trainedTokens: s.losses.length })),
          aggregation,
          { normConstant: C },
        );
        const weighted = seqs.reduce(
          (total, s, i) => total + s.losses.reduce((a, l) => a + (weights[i] as number) * l, 0),
          0,
        );
        expect(weighted).toBeCloseTo(reference(seqs, aggregation, C), 9);
      }),
    );
  });

  it('weighs every rollout the same under rollout-mean, however many sequences and tokens it has', () => {
    const weights = sequenceWeights(
      [
        { rolloutId: 'long', trainedTokens: 900 },
        { rolloutId: 'long', trainedTokens: 100 },
        { rolloutId: 'short', trainedTokens: 10 },
      ],
      'rollout-mean',
    );
    expect(900 * weights[0]! + 100 * weights[1]!).toBeCloseTo(0.5, 12);
    expect(10 * weights[2]!).toBeCloseTo(0.5, 12);
  });

  it('gives no weight to a sequence without trained tokens, nor counts it', () => {
    expect(
      sequenceWeights(
        [
          { rolloutId: 'a', trainedTokens: 0 },
          { rolloutId: 'a', trainedTokens: 4 },
        ],
        'seq-mean-token-sum',
      ),
    ).toEqual([0, 1]);
  });

  it('asks for the constant of seq-mean-token-sum-norm', () => {
    expect(() => sequenceWeights([{ rolloutId: 'a', trainedTokens: 1 }], 'seq-mean-token-sum-norm')).toThrow(
      /normConstant/,
    );
  });
});
