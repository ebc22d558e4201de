import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { discordantPairs, mcnemarExactP, pairedBootstrap } from './paired-tests.js';

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
    expect(discordantPairs({ a: 0, b: 1, c: 1, d: 0 }, { a: 1, b: 0, c: 1, d: 0 })).toEqual({
      gained: ['a'],
      lost: ['b'],
    });
    expect(() => discordantPairs({ a: 0, b: 1 }, { a: 1 })).toThrow(/no outcome after, e.g. b/);
  });
});

const pairedValues = fc.array(
  fc.record({
    task: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g'),
    incumbent: fc.integer({ min: 0, max: 1 }),
    candidate: fc.integer({ min: 0, max: 1 }),
  }),
  { minLength: 1, maxLength: 60 },
);
const realValues = fc.array(
  fc.record({
    task: fc.string({ minLength: 1, maxLength: 3 }),
    incumbent: fc.double({ min: -1e6, max: 1e6, noNaN: true }),
    candidate: fc.double({ min: -1e6, max: 1e6, noNaN: true }),
  }),
  { minLength: 1, maxLength: 40 },
);
// The gate's own range: at least 100 resamples, confidence above one half. (A handful of
// resamples can miss the estimate, as any percentile interval can.)
const bootOptions = fc.record({
  resamples: fc.integer({ min: 100, max: 400 }),
  confidence: fc.double({ min: 0.5, max: 0.999, noNaN: true, minExcluded: true }),
  seed: fc.integer(),
});

describe('the paired bootstrap', () => {
  it('gives an interval that holds the point estimate', () => {
    fc.assert(
      fc.property(fc.oneof(pairedValues, realValues), bootOptions, (pairs, options) => {
        const { gain, lower, upper } = pairedBootstrap(pairs, options);
        const exact = pairs.reduce((s, p) => s + (p.candidate - p.incumbent), 0) / pairs.length;
        expect(gain).toBeCloseTo(exact, 6);
        expect(lower).toBeLessThanOrEqual(upper);
        expect(lower).toBeLessThanOrEqual(gain);
        expect(upper).toBeGreaterThanOrEqual(gain);
      }),
    );
  });

  it('is deterministic for a seed, and mirrored when the policies swap', () => {
    fc.assert(
      fc.property(pairedValues, bootOptions, (pairs, options) => {
        const once = pairedBootstrap(pairs, options);
        expect(pairedBootstrap(pairs, options)).toEqual(once);
        const swapped = pairedBootstrap(
          pairs.map((p) => ({ task: p.task, incumbent: p.candidate, candidate: p.incumbent })),
          options,
        );
        expect(swapped.gain).toBe(-once.gain + 0);
        expect(swapped.lower).toBe(-once.upper + 0);
        expect(swapped.upper).toBe(-once.lower + 0);
      }),
    );
  });

  it('resamples whole tasks', () => {
    // One task: every resample is that task, so the interval collapses on the estimate.
    const oneTask = [0, 1, 1, 1].map((c) => ({ task: 'only', incumbent: 0, candidate: c }));
    expect(pairedBootstrap(oneTask, { resamples: 500, confidence: 0.95, seed: 3 })).toEqual({
      gain: 0.75,
      lower: 0.75,
      upper: 0.75,
    });
  });

  it('refuses bad input', () => {
    expect(() => pairedBootstrap([], { resamples: 10, confidence: 0.9, seed: 1 })).toThrow(/at least one pair/);
    expect(() =>
      pairedBootstrap([{ task: 'a', incumbent: 0, candidate: 1 }], { resamples: 0, confidence: 0.9, seed: 1 }),
    ).toThrow(/resamples/);
    expect(() =>
      pairedBootstrap([{ task: 'a', incumbent: 0, candidate: 1 }], { resamples: 10, confidence: 1, seed: 1 }),
    ).toThrow(/confidence/);
  });
});
