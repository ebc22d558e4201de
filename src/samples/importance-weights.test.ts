import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../random.js';
import type { ImportanceSampling } from './importance-sampling.js';
import { importanceWeights, type RatioSequence } from './importance-weights.js';

/**
 * The correction of docs/training-objective.md, checked against its definition. The seeded cases at
 * the end are the ones trainer/tests/test_importance_sampling.py rebuilds with the same generator
 * (mulberry32) and checks the PyTorch trainer's arithmetic on: one objective, two trainers. After a deliberate
 * change to the objective, REIN_WRITE_FIXTURES=1 rewrites them.
 */
const FIXTURE = path.resolve(import.meta.dirname, '../../trainer/tests/fixtures/importance_cases.json');

const SAMPLINGS: ImportanceSampling[] = [
  { mode: 'truncate', level: 'token', cap: 1.5 },
  { mode: 'mask', level: 'token', cap: 1.4, band: [0.7, 1.4] },
  { mode: 'mask', level: 'sequence', cap: 2, band: [0.8, 1.25] },
  { mode: 'mask', level: 'token', cap: 1.2, band: [0.5, 2] },
];

/** Case `seed`: 1–4 sequences of 2–10 tokens, float32 values as a batch holds them. Same draws in Python. */
function seededCase(seed: number): { sampling: ImportanceSampling; sequences: RatioSequence[] } {
  const random = seededRandom(seed);
  const pick = (n: number) => Math.floor(random() * n);
  const sequences = Array.from({ length: 1 + pick(4) }, () => {
    const length = 2 + pick(9);
    const prompt = pick(length);
    const weight = Math.fround(0.01 + 0.1 * random());
    const lossMask: number[] = [];
    const oldLogprobs: number[] = [];
    const parentLogprobs: number[] = [];
    for (let t = 0; t < length; t++) {
      const m = t >= prompt && random() < 0.85 ? 1 : 0;
      const old = m ? Math.fround(-0.1 - 4 * random()) : 0;
      lossMask.push(m);
      oldLogprobs.push(old);
      parentLogprobs.push(t === 0 ? 0 : Math.fround((m ? old : -1) + 1.6 * random() - 0.8));
    }
    return { lossMask, lossWeights: lossMask.map((m) => (m ? weight : 0)), oldLogprobs, parentLogprobs };
  });
  return { sampling: SAMPLINGS[seed % SAMPLINGS.length] as ImportanceSampling, sequences };
}

const trainedAt = (s: RatioSequence, t: number) => s.lossMask[t] === 1 && t > 0;
const ratioAt = (s: RatioSequence, t: number) =>
  Math.exp((s.parentLogprobs[t] as number) - (s.oldLogprobs[t] as number));

const logprob = fc.double({ min: -8, max: -0.01, noNaN: true }).map(Math.fround);
const sequenceArb = fc
  .array(fc.tuple(fc.integer({ min: 0, max: 1 }), logprob, fc.double({ min: -1.5, max: 1.5, noNaN: true })), {
    minLength: 1,
    maxLength: 12,
  })
  .map((tokens): RatioSequence => ({
    lossMask: tokens.map(([m]) => m),
    lossWeights: tokens.map(([m]) => (m ? 0.125 : 0)),
    oldLogprobs: tokens.map(([m, old]) => (m ? old : 0)),
    parentLogprobs: tokens.map(([, old, shift]) => Math.fround(old + shift)),
  }));
const bandArb = fc.tuple(
  fc.double({ min: 0.05, max: 0.99, noNaN: true }),
  fc.double({ min: 1.01, max: 5, noNaN: true }),
);
const samplingArb = fc.oneof(
  fc
    .double({ min: 0.5, max: 5, noNaN: true })
    .map((cap): ImportanceSampling => ({ mode: 'truncate', level: 'token', cap })),
  fc
    .tuple(
      bandArb,
      fc.constantFrom('token' as const, 'sequence' as const),
      fc.double({ min: 0.5, max: 5, noNaN: true }),
    )
    .map(([band, level, cap]): ImportanceSampling => ({ mode: 'mask', level, cap, band })),
);

describe('importance weights', () => {
  it('keep w·min(r, cap) inside the band, 0 outside; untrained tokens untouched', () => {
    fc.assert(
      fc.property(fc.array(sequenceArb, { minLength: 1, maxLength: 4 }), samplingArb, (sequences, sampling) => {
        const { lossWeights } = importanceWeights(sequences, sampling);
        sequences.forEach((s, i) => {
          const trained = s.lossMask.map((_, t) => t).filter((t) => trainedAt(s, t));
          const logRatios = trained.map((t) => Math.log(ratioAt(s, t)));
          const sequenceRatio = Math.exp(logRatios.reduce((a, b) => a + b, 0) / Math.max(1, trained.length));
          s.lossWeights.forEach((w, t) => {
            const got = lossWeights[i]![t]!;
            const judged = sampling.level === 'sequence' ? sequenceRatio : ratioAt(s, t);
            const inside = !sampling.band || (judged >= sampling.band[0] && judged <= sampling.band[1]);
            if (!trainedAt(s, t)) expect(got).toBe(w);
            else expect(got).toBeCloseTo(inside ? w * Math.min(ratioAt(s, t), sampling.cap) : 0, 12);
          });
          // A sequence is masked whole under level sequence.
          if (sampling.level === 'sequence' && trained.length > 0)
            expect(new Set(trained.map((t) => lossWeights[i]![t] === 0)).size).toBe(1);
        });
      }),
      { numRuns: 200 },
    );
  });

  it('report fractions and ratio ranges that agree with the weights', () => {
    fc.assert(
      fc.property(fc.array(sequenceArb, { minLength: 1, maxLength: 4 }), samplingArb, (sequences, sampling) => {
        const { lossWeights, report } = importanceWeights(sequences, sampling);
        const trained = sequences.flatMap((s, i) =>
          s.lossMask.flatMap((_, t) => (trainedAt(s, t) ? [[i, t] as const] : [])),
        );
        expect(report.tokens).toBe(trained.length);
        const zeroed = trained.filter(([i, t]) => lossWeights[i]![t] === 0).length;
        expect(report.maskedFraction).toBeCloseTo(trained.length ? zeroed / trained.length : 0, 12);
        for (const stats of [report.ratio, report.sequences.ratio]) {
          expect(stats.min).toBeLessThanOrEqual(stats.mean * (1 + 1e-12));
          expect(stats.mean).toBeLessThanOrEqual(stats.max * (1 + 1e-12));
        }
        expect(report.cappedFraction + report.maskedFraction).toBeLessThanOrEqual(1 + 1e-12);
        expect(report.sequences.maskedFraction).toBeGreaterThanOrEqual(0);
        expect(report.sequences.maskedFraction).toBeLessThanOrEqual(1);
        if (sampling.mode === 'truncate') expect(report.maskedFraction).toBe(0);
        // The ratio's spread bounds the sequence ratio's (a geometric mean lies between min and max).
        if (report.sequences.count > 0) {
          expect(report.sequences.ratio.min).toBeGreaterThanOrEqual(report.ratio.min * (1 - 1e-12));
          expect(report.sequences.ratio.max).toBeLessThanOrEqual(report.ratio.max * (1 + 1e-12));
        }
      }),
      { numRuns: 200 },
    );
  });

  it('mask with a band holding every ratio is truncation', () => {
    fc.assert(
      fc.property(
        fc.array(sequenceArb, { minLength: 1, maxLength: 4 }),
        fc.constantFrom('token' as const, 'sequence' as const),
        (sequences, level) => {
          const truncate = importanceWeights(sequences, { mode: 'truncate', level: 'token', cap: 2 });
          const wide = importanceWeights(sequences, { mode: 'mask', level, cap: 2, band: [1e-9, 1e9] });
          expect(wide.lossWeights).toEqual(truncate.lossWeights);
          expect(wide.report.maskedFraction).toBe(0);
        },
      ),
    );
  });

  it('agree with the seeded cases the PyTorch trainer is checked on', () => {
    const cases = Array.from({ length: 16 }, (_, seed) => {
      const c = seededCase(seed);
      return { seed, ...c, expected: importanceWeights(c.sequences, c.sampling) };
    });
    const text = `${JSON.stringify({ generator: 'importance-weights.test.ts seededCase (mulberry32)', cases })}\n`;
    if (process.env.REIN_WRITE_FIXTURES === '1') writeFileSync(FIXTURE, text);
    if (!existsSync(FIXTURE)) throw new Error(`${FIXTURE} is missing: run this test with REIN_WRITE_FIXTURES=1`);
    expect(JSON.parse(readFileSync(FIXTURE, 'utf8'))).toEqual(JSON.parse(text));
    // The cases exercise what they are for: some masking at each level, some capping.
    const masked = (level: string) =>
      cases.some((c) => c.sampling.level === level && c.expected.report.maskedFraction > 0);
    expect(masked('token') && masked('sequence')).toBe(true);
    expect(cases.some((c) => c.expected.report.cappedFraction > 0)).toBe(true);
  });
});
