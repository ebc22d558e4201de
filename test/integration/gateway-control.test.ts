import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ gateway: { bodyLimitBytes: 64 * 1024 } });
});
afterAll(() => t.close());

const ask = (client: OpenAI, content = 'hi', model = 'production') =>
  client.chat.completions.create({ model, messages: [{ role: 'user', content }] });

async function post(path: string, body: string, key?: string) {
  const res = await fetch(`${t.gateway.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key && { authorization: `Bearer ${key}` }) },
    body,
  });
  return { status: res.status, body: (await res.json()) as { error: { message: string; code: string } } };
}

describe('rollout API', () => {
  it('creates a rollout idempotently by id, with the same key both times', async () => {
    const first = await t.admin('POST', '/api/rollouts', {
      id: 'task-7-sample-0',
      taskId: 'task-7',
      mode: 'eval',
      metadata: { seed: 3 },
    });
    const again = await t.admin('POST', '/api/rollouts', {
      id: 'task-7-sample-0',
      taskId: 'task-7',
      mode: 'eval',
      metadata: { seed: 3 },
    });
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    // The same id with another body is not a retry: it would otherwise get the old rollout, pinned elsewhere.
    const other = await t.admin('POST', '/api/rollouts', {
      id: 'task-7-sample-0',
      taskId: 'task-7',
      mode: 'eval',
      metadata: { seed: 3 },
      policyVersion: 'policy-v2',
    });
    expect(other).toMatchObject({
      status: 409,
      body: {
        error: { code: 'conflict', message: expect.stringContaining('another policyVersion (null, not "policy-v2")') },
      },
    });
    expect(again.body.key).toBe(first.body.key);
    expect(first.body).toMatchObject({
      attempt: 1,
      baseUrl: `${t.gateway.url}/v1`,
      pathBaseUrl: `${t.gateway.url}/rollouts/task-7-sample-0/attempts/1/v1`,
      rollout: { id: 'task-7-sample-0', status: 'queued', mode: 'eval', taskId: 'task-7', metadata: { seed: 3 } },
    });
    expect((await t.admin('GET', '/api/rollouts/task-7-sample-0')).body).toMatchObject({ status: 'queued' });
  });

  it('lists rollouts page by page, filtered', async () => {
    for (let i = 0; i < 5; i++) await t.admin('POST', '/api/rollouts', { id: `list-${i}`, taskId: 'listing' });
    const page1 = await t.admin('GET', '/api/rollouts?taskId=listing&limit=2');
    const page2 = await t.admin('GET', `/api/rollouts?taskId=listing&limit=2&after=${page1.body.next}`);
    const page3 = await t.admin('GET', `/api/rollouts?taskId=listing&limit=2&after=${page2.body.next}`);
    expect([...page1.body.items, ...page2.body.items, ...page3.body.items].map((r: { id: string }) => r.id)).toEqual([
      'list-4',
      'list-3',
      'list-2',
      'list-1',
      'list-0',
    ]);
    expect(page3.body.next).toBeNull();
    const bad = await t.admin('GET', '/api/rollouts?status=done');
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('status');
  });

  it('moves through queued → running → succeeded and refuses illegal transitions with 409', async () => {
    const { id, client } = await t.rollout();
    await ask(client);
    expect((await t.admin('GET', `/api/rollouts/${id}`)).body.status).toBe('running');
    const back = await t.admin('POST', `/api/rollouts/${id}/status`, { status: 'queued' });
    expect(back.status).toBe(409);
    expect(back.body.error.message).toContain('running; it cannot become queued');
    expect(
      (await t.admin('POST', `/api/rollouts/${id}/status`, { status: 'succeeded', reason: 'verifier accepted' }))
        .status,
    ).toBe(200);

    await expect(ask(client)).rejects.toMatchObject({
      status: 409,
      message: expect.stringContaining('has finished (succeeded)'),
    });
    const events = (await t.admin('GET', `/api/rollouts/${id}/events`)).body.items;
    expect(events.map((e: { payload: unknown; source: string }) => [e.source, e.payload])).toEqual([
      ['gateway', { from: 'queued', to: 'running', reason: 'first model call' }],
      ['admin', { from: 'running', to: 'succeeded', reason: 'verifier accepted' }],
    ]);
  });

  it('starts a new attempt with a new key and refuses the superseded one', async () => {
    const { id, client, baseUrl } = await t.rollout();
    await ask(client);
    const retry = await t.admin('POST', `/api/rollouts/${id}/attempts`);
    expect(retry.body).toMatchObject({ attempt: 2, rollout: { attempts: 2 } });
    await expect(ask(client)).rejects.toMatchObject({
      status: 409,
      message: expect.stringContaining('superseded by attempt 2'),
    });
    await ask(new OpenAI({ apiKey: retry.body.key, baseURL: baseUrl, maxRetries: 0 }));
    const calls = (await t.admin('GET', `/api/rollouts/${id}/calls`)).body.items;
    expect(calls.map((c: { attempt: number; seq: number }) => [c.attempt, c.seq])).toEqual([
      [1, 1],
      [2, 1],
    ]);
    expect((await t.admin('GET', `/api/rollouts/${id}/calls?attempt=2`)).body.items).toHaveLength(1);
  });

  it("refuses a superseded attempt's score and status from the runner, so its calls and reward never part", async () => {
    // A runner presumed dead (its activity timed out and ran again elsewhere, starting attempt 2)
    // finishes attempt 1 after all: its reward and status would land on attempt 2, which has no calls.
    const { id, client } = await t.rollout();
    await ask(client);
    await t.admin('POST', `/api/rollouts/${id}/attempts`);
    const reward = { type: 'reward', value: 1, components: {} };
    expect(await t.admin('POST', `/api/rollouts/${id}/events?attempt=1`, reward)).toMatchObject({
      status: 409,
      body: { error: { code: 'attempt_superseded', message: expect.stringContaining('superseded by attempt 2') } },
    });
    expect(
      await t.admin('POST', `/api/rollouts/${id}/status`, { status: 'succeeded', reason: 'verified', attempt: 1 }),
    ).toMatchObject({
      status: 409,
      body: { error: { message: expect.stringContaining('attempt 1 of rollout') } },
    });
    const rollout = (await t.admin('GET', `/api/rollouts/${id}`)).body as { status: string; attempts: number };
    expect(rollout.attempts).toBe(2);
    expect(rollout.status).not.toBe('succeeded');
    // The current attempt's writes go through, recorded as that attempt's.
    expect(await t.admin('POST', `/api/rollouts/${id}/events?attempt=2`, reward)).toMatchObject({
      status: 201,
      body: { attempt: 2 },
    });
    expect(
      await t.admin('POST', `/api/rollouts/${id}/status`, { status: 'succeeded', reason: 'verified', attempt: 2 }),
    ).toMatchObject({ status: 200, body: { status: 'succeeded' } });
  });

  it("appends reward, span and custom events; a span is recorded once per action id, the verifier's reward once per attempt", async () => {
    const { id, key } = await t.rollout();
    const span = {
      type: 'span',
      actionId: 'a-1',
      name: 'calculator',
      input: { expression: '6*7' },
      output: '42',
      latencyMs: 3,
      permission: 'allowed',
    };
    expect((await post(`/api/rollouts/${id}/events`, JSON.stringify(span), key)).status).toBe(201);
    expect((await post(`/api/rollouts/${id}/events`, JSON.stringify(span), key)).status).toBe(201);
    await post(
      `/api/rollouts/${id}/events`,
      JSON.stringify({ type: 'custom', name: 'human_intervention', data: { by: 'ops' } }),
      key,
    );
    const verified = await t.admin('POST', `/api/rollouts/${id}/events`, {
      type: 'reward',
      value: 0.75,
      components: { success: 1, cost: -0.25 },
    });
    expect(verified.status).toBe(201);
    // The verifier's reward scores its attempt once: a second one (a racing runner's) gets the first back.
    const again = await t.admin('POST', `/api/rollouts/${id}/events`, { type: 'reward', value: 0 });
    expect([again.status, again.body]).toEqual([200, { ...verified.body, duplicate: true }]);

    const events = (await t.admin('GET', `/api/rollouts/${id}/events`)).body.items;
    expect(events.map((e: { type: string; source: string }) => [e.type, e.source])).toEqual([
      ['span', 'rollout'],
      ['custom', 'rollout'],
      ['reward', 'admin'],
    ]);
    expect(events[2].payload).toEqual({ value: 0.75, components: { success: 1, cost: -0.25 } });

    const invalid = await post(`/api/rollouts/${id}/events`, JSON.stringify({ type: 'reward', value: 'high' }), key);
    expect(invalid.status).toBe(400);
    expect(invalid.body.error.message).toContain('value');
  });
});

describe('keys and access', () => {
  it('refuses calls without a key, with an unknown key, and with a forged key', async () => {
    const { key, baseUrl } = await t.rollout();
    const forged = `${key.slice(0, -4)}AAAA`;
    for (const apiKey of ['', 'sk-not-a-rollout-key', forged]) {
      await expect(ask(new OpenAI({ apiKey, baseURL: baseUrl, maxRetries: 0 }))).rejects.toMatchObject({ status: 401 });
    }
  });

  it('lets a rollout key write only its own rollout', async () => {
    const mine = await t.rollout();
    const theirs = await t.rollout();
    const res = await post(
      `/api/rollouts/${theirs.id}/events`,
      JSON.stringify({ type: 'custom', name: 'x' }),
      mine.key,
    );
    expect(res.status).toBe(403);
    const viaPath = new OpenAI({ apiKey: mine.key, baseURL: theirs.pathBaseUrl, maxRetries: 0 });
    await expect(ask(viaPath)).rejects.toMatchObject({ status: 403 });
    expect(await t.store.listCalls(theirs.id)).toEqual([]);
  });

  it('keeps the control API for the admin key', async () => {
    const { key } = await t.rollout();
    expect((await t.admin('GET', '/api/rollouts', undefined, key)).status).toBe(403);
    expect((await fetch(`${t.gateway.url}/api/rollouts`)).status).toBe(401);
  });

  it('attributes calls by path for harnesses that cannot set a key', async () => {
    const keyed = await t.rollout();
    await ask(new OpenAI({ apiKey: keyed.key, baseURL: keyed.pathBaseUrl, maxRetries: 0 }), 'via path');
    expect((await t.store.listCalls(keyed.id))[0]?.requestReceived).toMatchObject({
      messages: [{ content: 'via path' }],
    });
    // Without its key, only a rollout created keyless accepts path calls.
    await expect(
      ask(new OpenAI({ apiKey: 'whatever', baseURL: keyed.pathBaseUrl, maxRetries: 0 })),
    ).rejects.toMatchObject({ status: 401 });
    const keyless = await t.rollout({ keyless: true });
    await ask(new OpenAI({ apiKey: 'whatever-the-harness-has', baseURL: keyless.pathBaseUrl, maxRetries: 0 }));
    expect(await t.store.listCalls(keyless.id)).toHaveLength(1);
  });

  it('answers 404 for a valid key whose rollout does not exist', async () => {
    const key = t.gateway.keys.issue('never-created', 1);
    await expect(ask(new OpenAI({ apiKey: key, baseURL: `${t.gateway.url}/v1`, maxRetries: 0 }))).rejects.toMatchObject(
      {
        status: 404,
        message: expect.stringContaining('rollout never-created does not exist'),
      },
    );
  });
});

describe('bad input', () => {
  it('answers malformed JSON with 400 naming the problem', async () => {
    const { key } = await t.rollout();
    const res = await post('/v1/chat/completions', '{"model": "production", "messages": [', key);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: 'malformed_json',
      message: expect.stringContaining('malformed JSON body'),
    });
  });

  it('answers a body that is not an object with 400', async () => {
    const { key } = await t.rollout();
    const res = await post('/v1/chat/completions', '[1, 2]', key);
    expect(res).toMatchObject({ status: 400, body: { error: { code: 'invalid_body' } } });
  });

  it('answers an oversized body with 413 naming the limit', async () => {
    const { key } = await t.rollout();
    const res = await post(
      '/v1/chat/completions',
      JSON.stringify({ model: 'production', messages: [{ role: 'user', content: 'x'.repeat(100_000) }] }),
      key,
    );
    expect(res.status).toBe(413);
    expect(res.body.error.message).toContain('gateway.bodyLimitBytes');
  });

  it('survives a burst of garbage and keeps serving', async () => {
    const { key, client } = await t.rollout();
    const junk = [
      '',
      '{',
      'null',
      '"str"',
      '{"model": 5}',
      '{"messages": "x"}',
      '\u0000\u0001',
      '{"model":"production"}',
    ];
    const statuses = await Promise.all(
      junk.map(async (body) => (await post('/v1/chat/completions', body, key)).status),
    );
    expect(statuses.every((s) => s >= 400 && s < 500)).toBe(true);
    await expect(ask(client, 'still here')).resolves.toMatchObject({
      choices: [{ message: { content: 'Echo: still here' } }],
    });
  });
});

describe('redaction', () => {
  it('removes secrets from the journal but forwards the request untouched', async () => {
    const { id, client, key } = await t.rollout();
    const secret = 'sk-live-abcdefghijklmnopqrstuvwx';
    await ask(client, `my key is ${secret} and my rollout key is ${key}`);
    const [call] = await t.store.listCalls(id);
    const journaled = JSON.stringify(call);
    expect(journaled).not.toContain(secret);
    expect(journaled).not.toContain(key);
    expect(journaled).toContain('[REDACTED:openai-key]');
    expect(journaled).toContain('[REDACTED:rollout-key]');
    expect(JSON.stringify(t.backend.requests.at(-1)?.body)).toContain(secret);
  });
});

describe('pause and drain for weight updates', () => {
  it('answers 429 with Retry-After while paused, drains in-flight calls, and resumes', async () => {
    const { client } = await t.rollout();
    // The backend holds this call until the test releases it: in flight for exactly as long as needed.
    const heldCall = client.chat.completions.create({
      model: 'fault:hold',
      messages: [{ role: 'user', content: 'held' }],
    });
    await vi.waitFor(() => expect(t.backend.held()).toBe(1), { timeout: 30_000, interval: 20 });
    expect((await t.admin('GET', '/api/policies')).body.items).toContainEqual(
      expect.objectContaining({ policyVersion: 'fault:hold', inFlight: 1, paused: false }),
    );
    await t.admin('POST', '/api/policies/fault:hold/pause');
    const forwarded = t.backend.requests.length;
    const refused = await fetch(`${t.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${(await t.rollout()).key}` },
      body: JSON.stringify({ model: 'fault:hold', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(t.backend.requests).toHaveLength(forwarded);

    // While the call is held, a drain cannot finish: it says so when its wait runs out.
    expect((await t.admin('POST', '/api/policies/fault:hold/drain?timeoutMs=0')).body).toMatchObject({
      drained: false,
      inFlight: 1,
      paused: true,
    });
    // A drain that is waiting when the call ends reports it drained.
    const drain = vi.spyOn(t.gateway.router, 'drain');
    try {
      const draining = t.admin('POST', '/api/policies/fault:hold/drain?timeoutMs=60000');
      await vi.waitFor(() => expect(drain).toHaveBeenCalledWith('fault:hold'), { timeout: 30_000, interval: 20 });
      t.backend.release();
      expect((await draining).body).toMatchObject({ drained: true, inFlight: 0, paused: true });
    } finally {
      drain.mockRestore();
    }
    await expect(heldCall).resolves.toMatchObject({ choices: [{ message: { content: 'Echo: held' } }] });

    await t.admin('POST', '/api/policies/fault:hold/resume');
    await expect(ask(client, 'after', 'production')).resolves.toBeTruthy();
  });
});

describe('versions registered at runtime', () => {
  // The toy backend serves "fault:slow:1" as a second, ordinary model.
  it('serves a newly registered version, moves an alias to it, and keeps a pinned rollout on its version', async () => {
    const registered = await t.admin('PUT', '/api/policies/policy-v2', { backend: 'toy', model: 'fault:slow:1' });
    expect(registered.body).toMatchObject({ policyVersion: 'policy-v2', model: 'fault:slow:1', aliases: [] });
    expect(
      (await t.admin('PUT', '/api/policies/policy-v3', { backend: 'nowhere', model: 'x' })).body.error.message,
    ).toMatch(/policy policy-v3 names unknown backend nowhere/);

    // Pinned: the harness keeps asking for "production"; the rollout's calls go to policy-v2.
    const pinned = await t.rollout({ policyVersion: 'policy-v2' });
    const pinnedReply = await pinned.client.chat.completions
      .create({ model: 'production', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    expect(pinnedReply.response.headers.get('x-rein-policy-version')).toBe('policy-v2');
    expect(t.backend.requests.at(-1)?.body.model).toBe('fault:slow:1');
    expect((await t.store.listCalls(pinned.id))[0]?.policyVersion).toBe('policy-v2');

    // Not pinned: "production" follows the alias.
    const free = await t.rollout();
    expect(
      (
        await free.client.chat.completions
          .create({ model: 'production', messages: [{ role: 'user', content: 'hi' }] })
          .withResponse()
      ).response.headers.get('x-rein-policy-version'),
    ).toBe('policy-v1');
    expect((await t.admin('PUT', '/api/aliases/production', { policyVersion: 'policy-v2' })).status).toBe(200);
    expect(
      (
        await free.client.chat.completions
          .create({ model: 'production', messages: [{ role: 'user', content: 'hi' }] })
          .withResponse()
      ).response.headers.get('x-rein-policy-version'),
    ).toBe('policy-v2');
    expect(
      (await t.admin('PUT', '/api/aliases/production', { policyVersion: 'policy-v9' })).body.error.message,
    ).toMatch(/policy policy-v9 is not in the routing table/);
    await t.admin('PUT', '/api/aliases/production', { policyVersion: 'policy-v1' });

    // A rollout pinned to a version the gateway does not serve fails clearly, before reaching a backend.
    const orphan = await t.rollout({ policyVersion: 'policy-gone' });
    await expect(
      orphan.client.chat.completions.create({ model: 'production', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/pinned to policy policy-gone, which is not in the routing table/),
    });
  });
});
