import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ADVANTAGE_ESTIMATORS, computeAdvantages, type ScoredRollout } from './advantages.js';

const group = (groupId: string, rewards: number[], tokens = 10): ScoredRollout[] =>
  rewards.map((reward, i) => ({ rolloutId: `${groupId}-${i}`, groupId, reward, trainedTokens: tokens }));

const sampleStd = (xs: number[]) => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  return Math.sqrt(xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1));
};

describe('computeAdvantages: the formulas, on a hand-built group', () => {
  const rollouts = group('t1', [1, 0, 0, 1]);

  it('grpo: (r − mean) / (sample std + ε)', () => {
    const { byRollout } = computeAdvantages(rollouts, { estimator: 'grpo', epsilon: 0 });
    const std = sampleStd([1, 0, 0, 1]);
    expect([...byRollout.values()]).toEqual([0.5 / std, -0.5 / std, -0.5 / std, 0.5 / std]);
  });

  it('dr_grpo: r − mean', () => {
    expect([...computeAdvantages(rollouts, { estimator: 'dr_grpo' }).byRollout.values()]).toEqual([
      0.5, -0.5, -0.5, 0.5,
    ]);
  });

  it('rloo: r − mean of the others', () => {
    const { byRollout } = computeAdvantages(group('t', [3, 1, 2]), { estimator: 'rloo' });
    expect([...byRollout.values()]).toEqual([3 - 1.5, 1 - 2.5, 2 - 2]);
  });

  it('reinforce_pp_baseline: group-centred, then whitened over trained tokens', () => {
    const batch = [...group('a', [1, 0], 2), ...group('b', [2, 0], 6)];
    const { byRollout } = computeAdvantages(batch, { estimator: 'reinforce_pp_baseline', epsilon: 0 });
    // Centred: a: ±0.5 (2 tokens each), b: ±1 (6 tokens each); token-weighted mean 0.
    const variance = (2 * 0.25 * 2 + 6 * 1 * 2) / (16 - 1);
    expect(byRollout.get('a-0')).toBeCloseTo(0.5 / Math.sqrt(variance), 12);
    expect(byRollout.get('b-1')).toBeCloseTo(-1 / Math.sqrt(variance), 12);
  });
});

describe('computeAdvantages: zero-variance groups', () => {
  it('drops groups with equal rewards (and groups of one) by default, and says so', () => {
    const result = computeAdvantages([...group('flat', [1, 1, 1]), ...group('single', [0.3]), ...group('ok', [1, 0])], {
      estimator: 'grpo',
    });
    expect([...result.byRollout.keys()]).toEqual(['ok-0', 'ok-1']);
    expect(result.zeroVarianceGroupIds).toEqual(['flat', 'single']);
    expect([...result.dropped]).toEqual([
      ['flat-0', 'zero_variance_group'],
      ['flat-1', 'zero_variance_group'],
      ['flat-2', 'zero_variance_group'],
      ['single-0', 'zero_variance_group'],
    ]);
  });

  it('keeps them with zero advantage when asked', () => {
    const result = computeAdvantages(group('flat', [0.7, 0.7]), { estimator: 'grpo', zeroVarianceGroups: 'keep' });
    expect([...result.byRollout.values()]).toEqual([0, 0]);
    expect(result.dropped.size).toBe(0);
  });
});

describe('computeAdvantages: properties', () => {
  const batch = fc
    .array(fc.array(fc.double({ min: -10, max: 10, noNaN: true }), { minLength: 2, maxLength: 8 }), {
      minLength: 1,
      maxLength: 6,
    })
    .map((groups) => groups.flatMap((rewards, g) => group(`g${g}`, rewards, 1 + g)));

  it('centres every kept group for grpo, dr_grpo and rloo', () => {
    fc.assert(
      fc.property(batch, fc.constantFrom('grpo', 'dr_grpo', 'rloo' as const), (rollouts, estimator) => {
        const { byRollout } = computeAdvantages(rollouts, { estimator });
        const sums = new Map<string, number>();
        for (const r of rollouts)
          if (byRollout.has(r.rolloutId))
            sums.set(r.groupId, (sums.get(r.groupId) ?? 0) + (byRollout.get(r.rolloutId) as number));
        for (const sum of sums.values()) expect(Math.abs(sum)).toBeLessThan(1e-6);
      }),
    );
  });

  it('orders rollouts within a group as their rewards, for every estimator', () => {
    fc.assert(
      fc.property(batch, fc.constantFrom(...ADVANTAGE_ESTIMATORS), (rollouts, estimator) => {
        const { byRollout } = computeAdvantages(rollouts, { estimator });
        for (const a of rollouts) {
          for (const b of rollouts) {
            if (a.groupId !== b.groupId || !byRollout.has(a.rolloutId) || a.reward <= b.reward + 1e-9) continue;
            expect(byRollout.get(a.rolloutId) as number).toBeGreaterThan(byRollout.get(b.rolloutId) as number);
          }
        }
      }),
    );
  });

  it('gives the leave-one-out baseline for rloo', () => {
    fc.assert(
      fc.property(batch, (rollouts) => {
        const { byRollout } = computeAdvantages(rollouts, { estimator: 'rloo' });
        for (const r of rollouts) {
          if (!byRollout.has(r.rolloutId)) continue;
          const others = rollouts
            .filter((o) => o.groupId === r.groupId && o.rolloutId !== r.rolloutId)
            .map((o) => o.reward);
          const baseline = others.reduce((a, b) => a + b, 0) / others.length;
          expect(byRollout.get(r.rolloutId)).toBeCloseTo(r.reward - baseline, 9);
        }
      }),
    );
  });
});
