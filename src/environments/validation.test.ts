import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { validateVariant, validationRecord, type ValidationResult } from './validation.js';
import { variantId, type VariantSpec } from './variant-spec.js';

/** One result per success, spread over three tasks, in order (null: unscored). */
const results = (successes: ReadonlyArray<number | null>): ValidationResult[] =>
  successes.map((success, sample) => ({ taskId: `t${sample % 3}`, sample, success }));

const success = fc.oneof(fc.constant(0), fc.constant(1), fc.double({ min: 0, max: 1, noNaN: true }));
const outcomes = fc.array(fc.option(success, { nil: null, freq: 4 }), { maxLength: 40 });

describe('validateVariant', () => {
  it('says in words why a variant is kept or dropped', () => {
    const some = [1, 1, 1, ...Array<number>(13).fill(0)];
    expect(validateVariant(results(some))).toEqual({
      kept: true,
      reason: 'solved by 3 of 16 samples: kept',
      samples: 16,
      scored: 16,
      solved: 3,
      solvedShare: 3 / 16,
    });
    expect(validateVariant(results(Array<number>(16).fill(0))).reason).toBe(
      'solved by no sample of 16 samples: too hard or broken (its verifier cannot tell good from bad)',
    );
    expect(validateVariant(results(Array<number>(16).fill(1))).reason).toBe(
      'solved by every sample of 16 samples: too easy to teach anything',
    );
    expect(validateVariant(results([1, 0, ...Array<null>(14).fill(null)]))).toMatchObject({
      kept: false,
      reason: 'only 2 of 16 samples scored: not enough evidence; run it again',
    });
    expect(validateVariant([])).toMatchObject({ kept: false, reason: 'no sample ran: nothing to judge; run it again' });
  });

  it('counts unscored samples neither as failures nor as successes', () => {
    const mixed = validateVariant(results([1, null, 0, 0, null, 1]));
    expect(mixed).toMatchObject({ kept: true, samples: 6, scored: 4, solved: 2, solvedShare: 0.5 });
    expect(mixed.reason).toBe('solved by 2 of 4 samples (2 more unscored): kept');
    // All scored ones solve it: the unscored do not make it "not solved by every sample".
    expect(validateVariant(results([1, 1, 1, null, null]))).toMatchObject({ kept: false, solved: 3, scored: 3 });
  });

  it('counts a success as solving when it reaches the threshold', () => {
    const partial = results([0.5, 0.9, 0.2, 0.7]);
    expect(validateVariant(partial)).toMatchObject({ kept: false, solved: 0 });
    expect(validateVariant(partial, { successThreshold: 0.7 })).toMatchObject({ kept: true, solved: 2 });
  });

  it('keeps a variant iff some but not all scored samples solve it, given enough scored', () => {
    fc.assert(
      fc.property(outcomes, fc.integer({ min: 1, max: 10 }), (outcome, minScored) => {
        const v = validateVariant(results(outcome), { minScored });
        const scores = outcome.filter((s): s is number => s !== null);
        expect(v.samples).toBe(outcome.length);
        expect(v.scored).toBe(scores.length);
        expect(v.solved).toBe(scores.filter((s) => s >= 1).length);
        expect(v.kept).toBe(v.scored >= minScored && v.solved > 0 && v.solved < v.scored);
        expect(v.solvedShare).toBeGreaterThanOrEqual(0);
        expect(v.solvedShare).toBeLessThanOrEqual(1);
      }),
    );
  });

  it('unscored samples change the verdict only through minScored', () => {
    fc.assert(
      fc.property(outcomes, fc.integer({ min: 0, max: 20 }), fc.integer({ min: 1, max: 10 }), (outcome, extra, min) => {
        const more = [...outcome, ...Array<null>(extra).fill(null)];
        const before = validateVariant(results(outcome), { minScored: min });
        const after = validateVariant(results(more), { minScored: min });
        expect([after.kept, after.scored, after.solved, after.solvedShare]).toEqual([
          before.kept,
          before.scored,
          before.solved,
          before.solvedShare,
        ]);
      }),
    );
  });

  it('refuses options and scores it cannot judge by, naming the fix', () => {
    expect(() => validateVariant(results([1, 0]), { minScored: 0 })).toThrow(/minScored must be a whole number/);
    expect(() => validateVariant(results([1, 0]), { successThreshold: Number.NaN })).toThrow(/successThreshold/);
    expect(() => validateVariant(results([1, Number.NaN]))).toThrow(/task t1 sample 1: success must be a number/);
  });
});

describe('validationRecord', () => {
  it('is the ledger’s JSON: the variant, what it changed, the environment, the numbers and the verdict', () => {
    const spec: VariantSpec = { name: 'big', state: { scale: 10 }, rules: { paging: { pageSize: 200 } } };
    const variant = { id: variantId('calculator@1:abc', spec), spec };
    const validation = validateVariant(results([1, 0, 0, 0]));
    const record = validationRecord(variant, 'calculator@1:abc', validation, new Date(Date.UTC(2025, 0, 2)));
    expect(JSON.parse(JSON.stringify(record))).toEqual({
      variant: variant.id,
      name: 'big',
      changes: 'state {"scale":10}; rules.paging {"pageSize":200}',
      environment: 'calculator@1:abc',
      samples: 4,
      scored: 4,
      solved: 1,
      solvedShare: 0.25,
      kept: true,
      reason: 'solved by 1 of 4 samples: kept',
      at: '2025-01-02T00:00:00.000Z',
    });
  });
});
