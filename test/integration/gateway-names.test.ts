import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { MODEL } from '../helpers/vllm-like-server.js';

// A bad name sent to the admin API is refused there, with Rein's error shape, and every later
// call goes on working: nothing half-registered that fails each call (or leaves calls in flight).

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => t?.close());

async function chat(model: string) {
  const { client } = await t.rollout();
  return client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
}

describe('gateway admin API names', () => {
  it('refuses a version or alias name that is not a routing name, and keeps serving', async () => {
    for (const route of ['/api/policies/v%0D%0AX%3A%201', '/api/policies/v%C3%A9', '/api/policies/__proto__']) {
      const res = await t.admin('PUT', route, { backend: 'toy', model: MODEL });
      expect(res, route).toMatchObject({
        status: 400,
        body: { error: { code: 'invalid_name', message: expect.stringMatching(/letters, digits/) } },
      });
    }
    for (const route of ['/api/aliases/%E2%9C%93', '/api/aliases/__proto__', '/api/aliases/constructor%0A']) {
      const res = await t.admin('PUT', route, { policyVersion: 'policy-v1' });
      expect(res, route).toMatchObject({ status: 400, body: { error: { code: 'invalid_name' } } });
    }
    expect((await chat('production')).choices[0]?.message).toBeDefined();
    expect(
      (await t.admin('GET', '/api/policies')).body.items.every((p: { inFlight: number }) => p.inFlight === 0),
    ).toBe(true);
  });

  it('a policy on an inherited property name as backend is refused, not a 500 on every later call', async () => {
    const res = await t.admin('PUT', '/api/policies/v9', { backend: 'constructor', model: MODEL });
    expect(res).toMatchObject({
      status: 400,
      body: { error: { message: expect.stringMatching(/unknown backend constructor/) } },
    });
    expect((await t.admin('PUT', '/api/aliases/staging', { policyVersion: 'constructor' })).status).toBe(404);
    expect((await chat('production')).choices[0]?.message).toBeDefined();
  });

  it('holds a backend model name and an alias to the same rule: no NUL, one namespace for aliases and versions', async () => {
    const nul = await t.admin('PUT', '/api/policies/v9', { backend: 'toy', model: 'toy\u0000model' });
    expect(nul).toMatchObject({ status: 400, body: { error: { message: expect.stringMatching(/letters, digits/) } } });
    // An alias named like a version (and the reverse) would win routing over it and be listed twice.
    const alias = await t.admin('PUT', '/api/aliases/policy-v1', { policyVersion: 'policy-v1' });
    expect(alias).toMatchObject({
      status: 400,
      body: { error: { message: expect.stringContaining('policy-v1 is both an alias and a policy version') } },
    });
    expect((await t.admin('PUT', '/api/policies/production', { backend: 'toy', model: MODEL })).status).toBe(400);
    const listed = (await t.admin('GET', '/api/policies')).body.items.map(
      (p: { policyVersion: string }) => p.policyVersion,
    );
    expect(listed).not.toContain('production');
    expect((await chat('production')).choices[0]?.message).toBeDefined();
  });
});
