import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { matchesHash, RolloutKeys, sha256Hex } from './keys.js';

describe('RolloutKeys', () => {
  const keys = new RolloutKeys(randomBytes(32));

  it('verifies the keys it issued, for exactly their rollout attempt', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 128 }),
        fc.integer({ min: 1, max: 999 }),
        (rolloutId, attempt) => {
          expect(keys.verify(keys.issue(rolloutId, attempt))).toEqual({ rolloutId, attempt });
        },
      ),
    );
  });

  it('rejects keys from another secret, edited keys and keys for another attempt', () => {
    const key = keys.issue('r1', 1);
    expect(new RolloutKeys(randomBytes(32)).verify(key)).toBeUndefined();
    expect(keys.verify(key.replace('.1.', '.2.'))).toBeUndefined();
    expect(keys.verify(`${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`)).toBeUndefined();
    expect(keys.verify('sk-something')).toBeUndefined();
    expect(keys.verify('rk-')).toBeUndefined();
  });

  it('answers a key verified before from memory, the same way, and still refuses its forgeries', () => {
    const key = keys.issue('cached', 2);
    const first = keys.verify(key) as { rolloutId: string; attempt: number };
    first.attempt = 99;
    expect(keys.verify(key)).toEqual({ rolloutId: 'cached', attempt: 2 });
    expect(keys.verify(key.replace('.2.', '.3.'))).toBeUndefined();
    expect(keys.verify(`${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`)).toBeUndefined();
    expect(new RolloutKeys(randomBytes(32)).verify(key)).toBeUndefined();
  });

  it('issues the same key for the same rollout attempt (idempotent creation)', () => {
    expect(keys.issue('r1', 3)).toBe(keys.issue('r1', 3));
  });

  it('matches an admin key against its hash only', () => {
    expect(matchesHash('secret', sha256Hex('secret'))).toBe(true);
    expect(matchesHash('Secret', sha256Hex('secret'))).toBe(false);
  });
});
