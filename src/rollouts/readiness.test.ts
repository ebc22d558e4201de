import { describe, expect, it } from 'vitest';
import { dependencyWaiter } from './readiness.js';

/** A check that reports a problem for its first `failures` calls. */
function flaky(failures: number) {
  let calls = 0;
  return {
    check: async () => (++calls <= failures ? [`backend down (${calls})`] : []),
    calls: () => calls,
  };
}

describe('dependencyWaiter', () => {
  it('waits until the dependency answers, saying what it waits for, and once for all concurrent launches', async () => {
    const dep = flaky(2);
    const said: Array<string | null> = [];
    const ready = dependencyWaiter(dep.check, { maxWaitMs: 60_000, onWaiting: (p) => said.push(p) });
    await Promise.all([ready(), ready(), ready()]);
    expect(dep.calls()).toBe(3);
    expect(said).toEqual([
      expect.stringMatching(/^backend down \(1\); waiting before launching more \(try 1/),
      expect.stringMatching(/^backend down \(2\);.*try 2/),
      null,
    ]);
    // Fresh: the next launches do not ask again.
    await ready();
    expect(dep.calls()).toBe(3);
  });

  it('spends one budget per batch: a dependency that stays down delays it once, not per launch', async () => {
    const dep = flaky(Infinity);
    const ready = dependencyWaiter(dep.check, { maxWaitMs: 1200 });
    await ready();
    expect(dep.calls()).toBeGreaterThanOrEqual(2); // it waited
    // Backoff doubles from 0.5 s, so a 1.2 s budget allows a handful of checks in all; then each launch asks once and
    // goes ahead.
    for (let i = 0; i < 5; i++) await ready();
    const spent = dep.calls();
    expect(spent).toBeLessThanOrEqual(2 + 5 + 3);
    await ready();
    expect(dep.calls()).toBe(spent + 1);
  });

  it('stops waiting when the batch is cancelled, and counts a failing check as a problem', async () => {
    const abort = new AbortController();
    const said: Array<string | null> = [];
    const ready = dependencyWaiter(async () => Promise.reject(new Error('gateway unreachable')), {
      maxWaitMs: 600_000,
      signal: abort.signal,
      onWaiting: (p) => said.push(p),
    });
    const waiting = ready();
    abort.abort();
    await waiting;
    expect(said[0]).toMatch(/^gateway unreachable; waiting/);
    expect(said.at(-1)).toBeNull();
  });
});
