import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { GatewayMember } from '../store/coordination-store.js';
import { admissionCap, membershipView, shareOf } from './backend-shares.js';

const members = (ids: string[], inFlight: number[], view = membershipView(ids)): GatewayMember[] =>
  ids.map((id, i) => ({ id, joinedAt: 0, view, inFlight: { b: inFlight[i] ?? 0 } }));

const cluster = fc
  .record({ limit: fc.integer({ min: 1, max: 200 }), n: fc.integer({ min: 1, max: 12 }) })
  .chain(({ limit, n }) =>
    fc.record({
      limit: fc.constant(limit),
      ids: fc.constant(Array.from({ length: n }, (_, i) => `g${String(i).padStart(2, '0')}`)),
      inFlight: fc.array(fc.integer({ min: 0, max: 2 * limit }), { minLength: n, maxLength: n }),
    }),
  );

describe('backend shares', () => {
  it('split the limit whole: ⌊limit / n⌋ each, the remainder one each to the lowest ids', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 50 }), (limit, n) => {
        const shares = Array.from({ length: n }, (_, i) => shareOf(limit, n, i));
        expect(shares.reduce((a, b) => a + b, 0)).toBe(limit);
        expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
        expect([...shares].sort((a, b) => b - a)).toEqual(shares);
      }),
    );
  });

  it('never let one gateway admit past the limit, counting what the others hold or may take', () => {
    fc.assert(
      fc.property(cluster, ({ limit, ids, inFlight }) => {
        const all = members(ids, inFlight);
        for (const [i, id] of ids.entries()) {
          const othersMayHold = ids.reduce(
            (sum, _, j) => (j === i ? sum : sum + Math.max(inFlight[j] ?? 0, shareOf(limit, ids.length, j))),
            0,
          );
          const cap = admissionCap(limit, 'b', id, all);
          expect(cap).toBeGreaterThanOrEqual(0);
          expect(cap).toBeLessThanOrEqual(shareOf(limit, ids.length, i));
          if (cap > 0) expect(cap + othersMayHold).toBeLessThanOrEqual(limit);
        }
      }),
    );
  });

  it('give each gateway its whole share once the others hold no more than theirs', () => {
    fc.assert(
      fc.property(cluster, ({ limit, ids }) => {
        const idle = members(
          ids,
          ids.map(() => 0),
        );
        const caps = ids.map((id) => admissionCap(limit, 'b', id, idle));
        expect(caps).toEqual(ids.map((_, i) => shareOf(limit, ids.length, i)));
      }),
    );
  });

  it('admit nothing new while a gateway reports another membership (one joined or left)', () => {
    const ids = ['a', 'b', 'c'];
    const stale = members(ids, [0, 0, 0]).map((m) => (m.id === 'c' ? { ...m, view: membershipView(['a', 'b']) } : m));
    expect(ids.map((id) => admissionCap(9, 'b', id, stale))).toEqual([0, 0, 3]);
    expect(admissionCap(9, 'b', 'z', stale)).toBe(0);
  });
});
