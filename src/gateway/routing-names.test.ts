import { describe, expect, it } from 'vitest';
import { validateConfig } from '../config/load.js';
import { Router, RoutingError, routingNameProblem, type RoutingTable } from './routing.js';

// Policy versions, aliases and backend names come from config files and the admin API, and a
// version name travels in a response header: one rule for all of them, and lookups that see
// only the table's own entries (never Object.prototype's "constructor" or "__proto__").

const table = (): RoutingTable => ({
  backends: { vllm: { endpoints: ['http://a/v1'], tokenIds: true, logprobs: true } },
  policies: { v1: { backend: 'vllm', model: 'base' } },
  aliases: { production: 'v1' },
});

function refusal(fn: () => unknown): RoutingError {
  try {
    fn();
  } catch (err) {
    if (err instanceof RoutingError) return err;
    throw err;
  }
  throw new Error('expected a RoutingError');
}

describe('routing names', () => {
  it('accepts the names models go by', () => {
    for (const name of [
      'v1',
      'policy-v1',
      'run-20261201-0531-a3f9-it2',
      'fault:slow:2500',
      'Qwen/Qwen3-0.6B',
      'llama3.1:8b',
      'gpt-4o-2024-08-06',
      'model@v2',
      'constructor',
    ]) {
      expect(routingNameProblem(name)).toBeUndefined();
    }
  });

  it('refuses control characters, non-ASCII, spaces, a leading symbol, and over-long names', () => {
    for (const name of ['v\r\nX: 1', 'vé', 'v 1', '__proto__', '-v', '', 'v'.repeat(201), 'v\0']) {
      expect(routingNameProblem(name)).toMatch(/letters, digits/);
    }
  });

  it('the router refuses a bad version or alias with a 400 and keeps serving', () => {
    const router = new Router(table());
    for (const register of [
      () => router.registerPolicy('v\r\nX: 1', { backend: 'vllm', model: 'm' }),
      () => router.registerPolicy('vé', { backend: 'vllm', model: 'm' }),
      () => router.setAlias('__proto__', 'v1'),
    ]) {
      expect(refusal(register)).toMatchObject({ status: 400, code: 'invalid_name' });
    }
    expect(() => router.setMirror('production', 'v\r\n', 1)).toThrow(RoutingError);
    const call = router.admit('production', 'r1');
    expect(call.route.policyVersion).toBe('v1');
    call.release();
    expect(router.models().map((m) => m.id)).toEqual(['production', 'v1']);
  });

  it('looks up only what the table holds', () => {
    const router = new Router(table());
    expect(refusal(() => router.registerPolicy('v2', { backend: 'constructor', model: 'm' }))).toMatchObject({
      status: 400,
      message: expect.stringMatching(/unknown backend constructor/),
    });
    expect(refusal(() => router.setAlias('staging', 'constructor'))).toMatchObject({ status: 404 });
    expect(refusal(() => router.pause('toString'))).toMatchObject({ status: 404 });
    expect(router.routesOf('constructor')).toBeUndefined();
    expect(router.admit('production', 'r1').route.policyVersion).toBe('v1');
    // A backend that is really called "constructor" is as good as any other.
    const own = new Router({
      backends: { constructor: { endpoints: ['http://a/v1'], tokenIds: true, logprobs: true } },
      policies: { constructor: { backend: 'constructor', model: 'm' } },
      aliases: { toString: 'constructor' },
    });
    expect(own.admit('toString', 'r1').route).toMatchObject({ policyVersion: 'constructor', endpoint: 'http://a/v1' });
  });
});

describe('gateway routing in the config', () => {
  const problems = (gateway: unknown) => {
    try {
      validateConfig({ gateway }, 'test');
    } catch (err) {
      return (err as { problems: string[] }).problems;
    }
    return [];
  };
  const backends = { vllm: { endpoints: ['http://gpu-1:8000/v1'] } };

  it('a policy whose backend is an inherited property name is unknown', () => {
    expect(problems({ backends, policies: { v1: { backend: 'constructor', model: 'm' } } })).toEqual([
      'gateway.policies.v1.backend: got "constructor"; expected a backend defined in gateway.backends (known: vllm)',
    ]);
    expect(
      problems({ backends, policies: { v1: { backend: 'vllm', model: 'm' } }, aliases: { production: '__proto__' } }),
    ).toEqual([
      'gateway.aliases.production: got "__proto__"; expected a policy version defined in gateway.policies (known: v1)',
    ]);
  });

  it('names follow the routing name rule', () => {
    const listed = problems(
      JSON.parse(
        '{"backends": {"vllm": {"endpoints": ["http://gpu-1:8000/v1"]}, "b c": {"endpoints": ["http://gpu-1:8000/v1"]}}, "policies": {"v\\r\\nX: 1": {"backend": "vllm", "model": "m"}}}',
      ),
    );
    expect(listed).toEqual([
      expect.stringMatching(/^gateway\.backends\.b c: "b c" is not a usable name: use 1 to 200 ASCII letters, digits/),
      expect.stringMatching(/^gateway\.policies\.v\r\nX: 1: "v\\r\\nX: 1" is not a usable name/),
    ]);
    expect(problems(JSON.parse('{"aliases": {"__proto__": "v1"}}'))).toEqual([
      'gateway.aliases."__proto__": the key is "__proto__", which no setting or name may be',
    ]);
  });

  it('keeps aliases and policy versions in one namespace: in the admin API and at config load', () => {
    const router = new Router(table());
    expect(refusal(() => router.setAlias('v1', 'v1'))).toMatchObject({ status: 400 });
    expect(refusal(() => router.registerPolicy('production', { backend: 'vllm', model: 'base' })).message).toContain(
      'production is both an alias and a policy version',
    );
    expect(router.status().map((p) => p.policyVersion)).toEqual(['v1']);
    expect(() =>
      validateConfig(
        {
          gateway: {
            backends: { vllm: { endpoints: ['http://a/v1'] } },
            policies: { v1: { backend: 'vllm', model: 'base' }, production: { backend: 'vllm', model: 'base' } },
            aliases: { production: 'v1' },
          },
        },
        'test',
      ),
    ).toThrow(/gateway\.aliases\.production.*also a policy version/);
  });
});
