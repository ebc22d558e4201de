import { describe, expect, it } from 'vitest';
import { BackendLimit, BackendLimits } from './backend-limits.js';
import { RoutingError } from './routing.js';

const never = new AbortController().signal;

describe('a backend limit in one gateway', () => {
  it('admits at once under its cap, then queues in arrival order as slots free up', async () => {
    const limit = new BackendLimit('b', { maxInFlight: 2, maxQueueWaitMs: 60_000 });
    limit.setCap(2, 'test');
    const first = limit.enter(never);
    const second = limit.enter(never);
    expect(typeof first).toBe('function');
    expect(typeof second).toBe('function');
    const order: string[] = [];
    const third = (limit.enter(never) as Promise<() => void>).then((release) => (order.push('third'), release));
    const fourth = (limit.enter(never) as Promise<() => void>).then((release) => (order.push('fourth'), release));
    expect(limit.waiting).toBe(2);
    (first as () => void)();
    (first as () => void)(); // a second release of the same slot frees nothing more
    (await third)();
    (await fourth)();
    expect(order).toEqual(['third', 'fourth']);
    expect(limit.inFlight).toBe(1);
  });

  it('holds calls while its cap is 0 and lets them in when the share comes', async () => {
    const limit = new BackendLimit('b', { maxInFlight: 4, maxQueueWaitMs: 60_000 });
    const waiting = limit.enter(never);
    expect(waiting).toBeInstanceOf(Promise);
    limit.setCap(1, 'its share');
    (await waiting)();
    expect(limit.inFlight).toBe(0);
  });

  it('refuses a call that waited its longest, naming the limit and the settings', async () => {
    const limit = new BackendLimit('vllm', { maxInFlight: 1, maxQueueWaitMs: 10 });
    limit.setCap(1, 'the whole limit');
    expect(typeof limit.enter(never)).toBe('function');
    const err = await (limit.enter(never) as Promise<unknown>).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RoutingError);
    expect(err).toMatchObject({ status: 429, code: 'backend_at_limit', retryAfterSeconds: 5 });
    expect((err as Error).message).toContain('gateway.backends.vllm.maxInFlight');
    expect(limit.waiting).toBe(0);
  });

  it('forgets a waiting call whose harness went away', async () => {
    const limit = new BackendLimit('b', { maxInFlight: 1, maxQueueWaitMs: 60_000 });
    const gone = new AbortController();
    const waiting = limit.enter(gone.signal) as Promise<unknown>;
    gone.abort(new Error('client closed'));
    await expect(waiting).rejects.toThrow('client closed');
    expect(limit.waiting).toBe(0);
    await expect(limit.enter(gone.signal)).rejects.toThrow('client closed');
    expect(limit.waiting).toBe(0);
  });

  it('leaves backends without a limit alone', () => {
    const limits = new BackendLimits({ free: undefined, capped: { maxInFlight: 3, maxQueueWaitMs: 1000 } });
    expect(limits.size).toBe(1);
    expect(typeof limits.enter('free', never)).toBe('function');
    expect(limits.inFlight()).toEqual({ capped: 0 });
  });
});
