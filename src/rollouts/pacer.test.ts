import { describe, expect, it } from 'vitest';
import { launchPacer } from './pacer.js';

describe('launchPacer', () => {
  it('releases launches at most perSecond apart, in the order they asked', async () => {
    const pace = launchPacer(20);
    const start = performance.now();
    const released: Array<{ i: number; at: number }> = [];
    await Promise.all(
      Array.from({ length: 5 }, (_, i) => pace().then(() => released.push({ i, at: performance.now() }))),
    );
    expect(released.map((r) => r.i)).toEqual([0, 1, 2, 3, 4]);
    // Launch k has its slot k × 50 ms after the first ask. A late timer can bring two releases
    // closer than 50 ms (the slots stay fixed), but none is ever released before its slot; libuv
    // rounds timers to whole milliseconds, hence the 2 ms of slack.
    for (let k = 1; k < released.length; k++) expect(released[k]!.at - start).toBeGreaterThanOrEqual(k * 50 - 2);
  });

  it('does not wait without a rate', async () => {
    const pace = launchPacer(undefined);
    let released = 0;
    const all = Promise.all(Array.from({ length: 100 }, () => pace().then(() => released++)));
    // No timer: every launch is released before the event loop's next turn, however loaded the machine.
    await new Promise((r) => setImmediate(r));
    expect(released).toBe(100);
    await all;
  });
});
