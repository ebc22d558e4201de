import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { discordantPairs, mcnemarExactP } from './paired-tests.js';

describe('the exact McNemar test', () => {
  it('matches the binomial tail computed by hand', () => {
    expect(mcnemarExactP(0, 0)).toBe(1);
    expect(mcnemarExactP(3, 0)).toBeCloseTo(1 / 8, 12);
    expect(mcnemarExactP(2, 1)).toBeCloseTo(4 / 8, 12); // P(X>=2), X ~ Bin(3, 1/2)
    expect(mcnemarExactP(10, 0)).toBeCloseTo(1 / 1024, 12);
    expect(mcnemarExactP(15, 3)).toBeCloseTo(0.003769, 6);
  });

  it('is a probability that falls as gains grow and rises as losses grow', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 400 }), (gained, lost) => {
        const p = mcnemarExactP(gained, lost);
        expect(p).toBeGreaterThan(0);
        expect(p).toBeLessThanOrEqual(1);
        expect(mcnemarExactP(gained + 1, lost)).toBeLessThanOrEqual(p + 1e-12);
        expect(mcnemarExactP(gained, lost + 1)).toBeGreaterThanOrEqual(p - 1e-12);
      }),
    );
  });

  it('refuses counts that are not counts', () => {
    expect(() => mcnemarExactP(-1, 2)).toThrow(/non-negative integer/);
    expect(() => mcnemarExactP(1.5, 2)).toThrow(/non-negative integer/);
  });
});

describe('discordant pairs', () => {
  it('counts tasks gained and lost, and refuses an unpaired comparison', () => {
    expect(discordantPairs({ a: 0, b: 1, c: 1, d: 0 }, { a: 1, b: 0, c: 1, d: 0 })).toEqual({ gained: ['a'], lost: ['b'] });
    expect(() => discordantPairs({ a: 0, b: 1 }, { a: 1 })).toThrow(/no outcome after, e.g. b/);
  });
});
