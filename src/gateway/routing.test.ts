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
    expect(router.admit('production', 'r1').route).toMatchObject({
      policyVersion: 'v1',
      model: 'base',
      backendName: 'vllm',
    });
    expect(router.admit('v2', 'r1').route).toMatchObject({ policyVersion: 'v2', model: 'lora-2' });
    expect(() => router.admit('gpt-4', 'r1')).toThrow('The model `gpt-4` does not exist.');
    // No model, as vLLM takes it: the rollout's pinned version, else production.
    expect(router.admit(undefined, 'r1').route.policyVersion).toBe('v1');
    expect(router.admit(undefined, 'r1', 'v2').route.policyVersion).toBe('v2');
    expect(() => new Router({ ...table, aliases: {} }).admit(undefined, 'r1')).toThrow(/names no model/);
    expect(() => router.admit(7, 'r1')).toThrow(/names no model/);
  });

  it('serves a pinned rollout its version whatever name it sends; unknown names of others go to defaultModel', () => {
    const router = new Router(table);
    expect(router.admit('gpt-4o-mini', 'r1', 'v2').route).toMatchObject({ policyVersion: 'v2', model: 'lora-2' });
    expect(() => router.admit('gpt-4o-mini', 'r1')).toThrow(
      'The model `gpt-4o-mini` does not exist. Names served here: production, candidate, v1, v2; gateway.defaultModel',
    );
    const withDefault = new Router({ ...table, defaultModel: 'candidate' });
    expect(withDefault.admit('gpt-4o-mini', 'r1').route.policyVersion).toBe('v2');
    expect(withDefault.admit('v1', 'r1').route.policyVersion).toBe('v1');
    expect(() => new Router({ ...table, defaultModel: 'gone' }).admit('gpt-4o-mini', 'r1')).toThrow(
      /gateway.defaultModel gone is not served either/,
    );
    const many = Object.fromEntries(
      Array.from({ length: 30 }, (_, i) => [`v${i + 10}`, { backend: 'vllm', model: 'm' }]),
    );
    expect(() => new Router({ ...table, policies: { ...table.policies, ...many } }).admit('x', 'r1')).toThrow(
      /and 14 more \(GET \/v1\/models lists them\)/,
    );
  });

  it('keeps a rollout on one endpoint and spreads rollouts over all of them', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), (rolloutId) => {
        expect(stickyEndpoint(table.backends.vllm!.endpoints, rolloutId)).toBe(
          stickyEndpoint(table.backends.vllm!.endpoints, rolloutId),
        );
      }),
    );
    const used = new Set(
      Array.from({ length: 200 }, (_, i) => stickyEndpoint(table.backends.vllm!.endpoints, `rollout-${i}`)),
    );
    expect(used).toEqual(new Set(table.backends.vllm!.endpoints));
  });

  it('counts in-flight calls, refuses new ones while paused, and reports when drained', async () => {
    const router = new Router(table, 7);
    const a = router.admit('production', 'r1');
    const b = router.admit('v1', 'r2');
    router.pause('v1');
    expect(() => router.admit('production', 'r3')).toThrow(
      expect.objectContaining({ status: 429, retryAfterSeconds: 7 }),
    );
    expect(router.admit('candidate', 'r3').route.policyVersion).toBe('v2');
    expect(router.status().find((p) => p.policyVersion === 'v1')).toMatchObject({
      inFlight: 2,
      paused: true,
      aliases: ['production'],
    });
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

  it('mirrors an alias to a candidate for unpinned calls through the alias only', () => {
    const router = new Router({ ...table, policies: { ...table.policies, v3: { backend: 'vllm', model: 'lora-3' } } });
    expect(router.setMirror('production', 'v3')).toEqual({
      alias: 'production',
      incumbent: 'v1',
      candidate: 'v3',
      sampleRate: 1,
    });
    expect(router.mirrors()).toEqual([{ alias: 'production', incumbent: 'v1', candidate: 'v3', sampleRate: 1 }]);

    const mirrored = router.admit('production', 'r1');
    expect(mirrored.route.policyVersion).toBe('v1');
    expect(mirrored.mirror).toMatchObject({
      policyVersion: 'v3',
      model: 'lora-3',
      endpoint: stickyEndpoint(table.backends.vllm!.endpoints, 'r1'),
    });
    // By version, through another alias, or pinned (Rein's own traffic): not production's calls.
    expect(router.admit('v1', 'r1').mirror).toBeUndefined();
    expect(router.admit('candidate', 'r1').mirror).toBeUndefined();
    expect(router.admit('production', 'r1', 'v1').mirror).toBeUndefined();

    // The alias moving keeps its mirror; the candidate may even be the alias's own version.
    router.setAlias('production', 'v2');
    expect(router.mirrors()).toEqual([{ alias: 'production', incumbent: 'v2', candidate: 'v3', sampleRate: 1 }]);
    router.setMirror('production', 'v2');
    expect(router.admit('production', 'r1').mirror?.policyVersion).toBe('v2');

    expect(router.clearMirror('production')).toMatchObject({ candidate: 'v2' });
    expect(router.clearMirror('production')).toBeUndefined();
    expect(router.admit('production', 'r1').mirror).toBeUndefined();
  });

  it('refuses a mirror of an unknown alias or to an unregistered candidate, naming the fix', () => {
    const router = new Router(table);
    expect(() => router.setMirror('staging', 'v2')).toThrow(
      expect.objectContaining({
        status: 404,
        message: expect.stringContaining('known aliases: production, candidate'),
      }),
    );
    expect(() => router.setMirror('production', 'v9')).toThrow(
      expect.objectContaining({ status: 404, message: expect.stringContaining('PUT /api/policies/v9') }),
    );
    expect(() => router.setMirror('constructor', 'v2')).toThrow(/alias constructor does not exist/);
    expect(() => router.admit('constructor', 'r1')).toThrow(/does not exist/);
    expect(router.mirrors()).toEqual([]);
  });

  it('counts a shadow call in flight on the candidate, and skips the mirror while the candidate is paused', async () => {
    const router = new Router(table);
    router.setMirror('production', 'v2');
    const call = router.admit('production', 'r1');
    const inFlight = (version: string) => router.status().find((p) => p.policyVersion === version)?.inFlight;
    expect([inFlight('v1'), inFlight('v2')]).toEqual([1, 1]);
    // The production call ends first; draining the candidate waits for its shadow.
    call.release();
    let drained = false;
    const draining = router.drain('v2').then(() => (drained = true));
    await Promise.resolve();
    expect(drained).toBe(false);
    router.pause('v2');
    const whilePaused = router.admit('production', 'r2');
    expect(whilePaused.mirror).toBeUndefined();
    call.mirror?.release();
    await draining;
    whilePaused.release();
    expect([inFlight('v1'), inFlight('v2')]).toEqual([0, 0]);
  });

  it('rejects a table whose references dangle', () => {
    expect(() => new Router({ ...table, aliases: { production: 'v9' } })).toThrow(
      /alias production points at unknown policy v9/,
    );
    expect(
      () =>
        new Router({
          ...table,
          mirrors: { production: { candidate: 'v9', sampleRate: 1 }, staging: { candidate: 'v1', sampleRate: 1 } },
        }),
    ).toThrow(/alias production is mirrored to unknown policy v9; mirror of alias staging, which does not exist/);
  });

  it('mirrors a sample of rollouts, each one whole, when asked for less than all', () => {
    const router = new Router(table);
    expect(() => router.setMirror('production', 'v2', 0)).toThrow(/sampleRate must be in \(0, 1\]/);
    expect(router.setMirror('production', 'v2', 0.25)).toMatchObject({ candidate: 'v2', sampleRate: 0.25 });
    const mirrored = (id: string) => {
      const call = router.admit('production', id);
      call.release();
      call.mirror?.release();
      return call.mirror !== undefined;
    };
    const ids = Array.from({ length: 2000 }, (_, i) => `r${i}`);
    const share = ids.filter(mirrored).length / ids.length;
    expect(share).toBeGreaterThan(0.2);
    expect(share).toBeLessThan(0.3);
    // A rollout in the sample has every call mirrored, one outside none.
    for (const id of ids.slice(0, 50))
      expect([mirrored(id), mirrored(id), mirrored(id)].every((m) => m === mirrored(id))).toBe(true);
  });
});
