import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sampleToken, topLogprobs } from './sampling.js';

const logits = [2, 1, 0, -1];
const logZ = Math.log(logits.reduce((s, l) => s + Math.exp(l), 0));

describe('sampleToken with a mask', () => {
  it("never draws a banned token, greedy or sampled, and reports the model's own (unmasked) log-prob", () => {
    const ban = { ban: new Set([0]) };
    expect(sampleToken(logits, 0, 1, 0.5, ban)).toEqual({ id: 1, logprob: expect.closeTo(1 - logZ, 12) });
    for (let u = 0; u < 1; u += 0.01) expect(sampleToken(logits, 1, 1, u, ban).id).not.toBe(0);
    for (let u = 0; u < 1; u += 0.01) expect(sampleToken(logits, 1, 0.3, u, ban).id).toBe(1);
  });

  it('draws only allowed tokens, the unlikeliest too', () => {
    const allow = { allow: new Set([3]) };
    expect(sampleToken(logits, 0, 1, 0, allow)).toEqual({ id: 3, logprob: expect.closeTo(-1 - logZ, 12) });
    expect(sampleToken(logits, 1, 1, 0.99, allow)).toEqual({ id: 3, logprob: expect.closeTo(-1 - logZ, 12) });
  });

  it('draws from the model distribution renormalised over the allowed tokens, reporting the unmasked log-prob', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: -5, max: 5, noNaN: true }), { minLength: 2, maxLength: 8 }),
        fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
        (raw, picks) => {
          const allowed = raw.map((_, id) => id).filter((id) => picks[id]);
          fc.pre(allowed.length > 0);
          const mask = { allow: new Set(allowed) };
          // The chance of each token under the sampler (u over a fine grid) is its reported probability.
          const drawn = new Map<number, { count: number; logprob: number }>();
          const grid = 1000;
          for (let i = 0; i < grid; i++) {
            const { id, logprob } = sampleToken(raw, 1, 1, (i + 0.5) / grid, mask);
            expect(allowed).toContain(id);
            drawn.set(id, { count: (drawn.get(id)?.count ?? 0) + 1, logprob });
          }
          // The allowed tokens' share of the model's probability: what the draw is renormalised by.
          const all = topLogprobs(raw, raw.length);
          expect(all.reduce((sum, t) => sum + Math.exp(t.logprob), 0)).toBeCloseTo(1, 9);
          const allowedMass = all
            .filter((t) => allowed.includes(t.id))
            .reduce((sum, t) => sum + Math.exp(t.logprob), 0);
          for (const { count, logprob } of drawn.values()) {
            expect(Math.abs(count / grid - Math.exp(logprob) / allowedMass)).toBeLessThan(2 / grid);
          }
        },
      ),
      { numRuns: 30 },
    );
  });

  it('draws exactly as without one when the mask is null', () => {
    for (const u of [0, 0.3, 0.6, 0.9, 0.999])
      for (const [t, p] of [
        [1, 1],
        [0.7, 0.8],
        [0, 1],
      ] as const)
        expect(sampleToken(logits, t, p, u, null)).toEqual(sampleToken(logits, t, p, u));
  });
});

describe('topLogprobs', () => {
  it('gives the k likeliest tokens with the model log-probs, likeliest first', () => {
    expect(topLogprobs([0, 3, 1, 3], 3)).toEqual([
      { id: 1, logprob: expect.closeTo(3 - Math.log(1 + 2 * Math.exp(3) + Math.exp(1)), 12) },
      { id: 3, logprob: expect.closeTo(3 - Math.log(1 + 2 * Math.exp(3) + Math.exp(1)), 12) },
      { id: 2, logprob: expect.closeTo(1 - Math.log(1 + 2 * Math.exp(3) + Math.exp(1)), 12) },
    ]);
    expect(topLogprobs(logits, 0)).toEqual([]);
    expect(topLogprobs(logits, 20)).toHaveLength(4);
  });
});
