import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ROLLOUT_STATUSES } from '../rollouts/rollout.js';
import type { AgedRollout } from '../store/trace-store.js';
import { splitPage } from './plan.js';
import type { Protections } from './protections.js';

const batch: fc.Arbitrary<string> = fc.constantFrom('r1.it1', 'r1.it2', 'heldout.v1.abc', 'shadow.v2', 'adhoc');
const rolloutArb = fc.record({
  id: fc.constantFrom(...Array.from({ length: 12 }, (_, i) => `r${i}`)),
  status: fc.constantFrom(...ROLLOUT_STATUSES),
  batchId: fc.option(batch, { nil: null }),
  updatedAt: fc.integer({ min: 0, max: 1000 }),
  calls: fc.nat(20),
  shadowCalls: fc.nat(3),
  events: fc.nat(10),
  bytes: fc.nat(10_000),
}) satisfies fc.Arbitrary<AgedRollout>;
const protectionsArb = fc.record({
  policyBatches: fc.dictionary(batch, fc.constantFrom('r1.v1', 'r1.v2')).map((d) => new Map(Object.entries(d))),
  decisionBatches: fc.dictionary(batch, fc.constant('d1')).map((d) => new Map(Object.entries(d))),
  decisionRollouts: fc
    .dictionary(fc.constantFrom('r0', 'r3', 'r7'), fc.constant('d2'))
    .map((d) => new Map(Object.entries(d))),
  activeBatches: fc.uniqueArray(batch).map((b) => new Set(b)),
}) satisfies fc.Arbitrary<Protections>;

describe('the retention plan', () => {
  it('deletes nothing protected and keeps nothing unprotected: every aged rollout is in exactly one part', () => {
    fc.assert(
      fc.property(fc.uniqueArray(rolloutArb, { selector: (r) => r.id }), protectionsArb, (rollouts, p) => {
        const { doomed, kept } = splitPage(rollouts, p);
        expect([...doomed, ...kept.map((k) => k.rollout)].map((r) => r.id).sort()).toEqual(
          rollouts.map((r) => r.id).sort(),
        );
        for (const r of doomed) {
          expect(['succeeded', 'failed', 'cancelled']).toContain(r.status);
          expect(p.decisionRollouts.has(r.id)).toBe(false);
          if (r.batchId !== null) {
            expect(
              p.policyBatches.has(r.batchId) || p.decisionBatches.has(r.batchId) || p.activeBatches.has(r.batchId),
            ).toBe(false);
          }
        }
        for (const { rollout, reason, by } of kept) {
          const needs = {
            unfinished: !['succeeded', 'failed', 'cancelled'].includes(rollout.status),
            policyBatch: rollout.batchId !== null && p.policyBatches.get(rollout.batchId) === by,
            decision:
              p.decisionRollouts.get(rollout.id) === by ||
              (rollout.batchId !== null && p.decisionBatches.get(rollout.batchId) === by),
            batchInUse: rollout.batchId === by && p.activeBatches.has(by),
          };
          expect(needs[reason]).toBe(true);
        }
      }),
    );
  });
});
