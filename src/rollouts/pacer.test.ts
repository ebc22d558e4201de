import { describe, expect, it } from 'vitest';
import { launchPacer } from './pacer.js';

describe('launchPacer', () => {
  it('releases launches at most perSecond apart, in the order they asked', async () => {
    const pace = launchPacer(20);
    const released: Array<{ i: number; at: number }> = [];
    await Promise.all(Array.from({ length: 5 }, (_, i) => pace().then(() => released.push({ i, at: performance.now() }))));
    expect(released.map((r) => r.i)).toEqual([0, 1, 2, 3, 4]);
    // Timers fire late, never early (to the millisecond), so each gap is at least 50 ms whatever the load.
    for (let k = 1; k < released.length; k++) expect(released[k]!.at - released[k - 1]!.at).toBeGreaterThanOrEqual(49);
  });

  it('does not wait without a rate', async () => {
    const pace = launchPacer(undefined);
    const started = performance.now();
    await Promise.all(Array.from({ length: 100 }, () => pace()));
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
