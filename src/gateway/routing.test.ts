import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Router, stickyEndpoint, type RoutingTable } from './routing.js';

const table: RoutingTable = {
  backends: { vllm: { endpoints: ['http://a/v1', 'http://b/v1', 'http://c/v1'], tokenIds: true, logprobs: true } },
  policies: { v1: { backend: 'vllm', model: 'base' }, v2: { backend: 'vllm', model: 'lora-2' } },
  aliases: { production: 'v1', candidate: 'v2' },
};

describe('Router', () => {
  it('resolves an alias or a version to the policy, its backend model and an endpoint', () => {
    const router = new Router(table);
    expect(router.admit('production', 'r1').route).toMatchObject({ policyVersion: 'v1', model: 'base', backendName: 'vllm' });
    expect(router.admit('v2', 'r1').route).toMatchObject({ policyVersion: 'v2', model: 'lora-2' });
    expect(() => router.admit('gpt-4', 'r1')).toThrow(/model "gpt-4" is not served here; known: production, candidate, v1, v2/);
    expect(() => router.admit(undefined, 'r1')).toThrow(/names no model/);
  });

  it('keeps a rollout on one endpoint and spreads rollouts over all of them', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), (rolloutId) => {
        expect(stickyEndpoint(table.backends.vllm!.endpoints, rolloutId)).toBe(stickyEndpoint(table.backends.vllm!.endpoints, rolloutId));
      }),
    );
    const used = new Set(Array.from({ length: 200 }, (_, i) => stickyEndpoint(table.backends.vllm!.endpoints, `rollout-${i}`)));
    expect(used).toEqual(new Set(table.backends.vllm!.endpoints));
  });

  it('counts in-flight calls, refuses new ones while paused, and reports when drained', async () => {
    const router = new Router(table, 7);
    const a = router.admit('production', 'r1');
    const b = router.admit('v1', 'r2');
    router.pause('v1');
    expect(() => router.admit('production', 'r3')).toThrow(expect.objectContaining({ status: 429, retryAfterSeconds: 7 }));
    expect(router.admit('candidate', 'r3').route.policyVersion).toBe('v2');
    expect(router.status().find((p) => p.policyVersion === 'v1')).toMatchObject({ inFlight: 2, paused: true, aliases: ['production'] });
    let drained = false;
    const draining = router.drain('v1').then(() => (drained = true));
    a.release();
    a.release(); // a second release of the same call changes nothing
    await Promise.resolve();
    expect(drained).toBe(false);
    b.release();
    await draining;
    expect(router.status().find((p) => p.policyVersion === 'v1')?.inFlight).toBe(0);
    router.resume('v1');
    expect(router.admit('production', 'r4').route.policyVersion).toBe('v1');
  });

  it('rejects a table whose references dangle', () => {
    expect(() => new Router({ ...table, aliases: { production: 'v9' } })).toThrow(/alias production points at unknown policy v9/);
  });
});
