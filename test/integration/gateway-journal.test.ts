import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROLLOUT_ID_MAX_LENGTH } from '../../src/rollouts/rollout-id.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(() => t.close());

const ask = (client: OpenAI, content = 'hi') => client.chat.completions.create({ model: 'production', messages: [{ role: 'user', content }] });

async function postEvent(id: string, event: unknown, key: string) {
  const res = await fetch(`${t.gateway.url}/api/rollouts/${encodeURIComponent(id)}/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(event),
  });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } };
}

describe('a superseded attempt', () => {
  it('cannot append events with its key, as it cannot call the model', async () => {
    const { id, key, client } = await t.rollout();
    await ask(client);
    const retry = await t.admin('POST', `/api/rollouts/${id}/attempts`);
    expect(retry.status).toBe(201);
    const stale = await postEvent(id, { type: 'span', actionId: 'rm-1', name: 'rm -rf', kind: 'action', irreversible: true, failure: 'deleted' }, key);
    expect(stale.status).toBe(409);
    expect(stale.body.error).toMatchObject({ code: 'attempt_superseded', message: expect.stringContaining('superseded by attempt 2') });
    expect(await t.store.listEvents(id)).not.toContainEqual(expect.objectContaining({ type: 'span' }));
    // The current attempt's key still appends.
    expect((await postEvent(id, { type: 'custom', name: 'note' }, retry.body.key)).status).toBe(201);
  });

  it('cannot append events for an attempt that was never started', async () => {
    const { id } = await t.rollout();
    const future = t.gateway.keys.issue(id, 2);
    const res = await postEvent(id, { type: 'custom', name: 'note' }, future);
    expect(res.status).toBe(404);
    expect(res.body.error?.code).toBe('attempt_not_found');
  });
});

describe('rollout ids', () => {
  it('accepts an id of the longest length everywhere it is used: creation, control routes, events and the path form of calls', async () => {
    const id = `b.${'t'.repeat(ROLLOUT_ID_MAX_LENGTH - 6)}:x.0`;
    expect(id).toHaveLength(ROLLOUT_ID_MAX_LENGTH);
    const created = await t.admin('POST', '/api/rollouts', { id });
    expect(created.status).toBe(201);
    expect((await t.admin('GET', `/api/rollouts/${encodeURIComponent(id)}`)).status).toBe(200);
    expect((await postEvent(id, { type: 'custom', name: 'note' }, created.body.key)).status).toBe(201);
    await ask(new OpenAI({ apiKey: created.body.key, baseURL: created.body.pathBaseUrl, maxRetries: 0 }), 'via path');
    expect(await t.store.listCalls(id)).toHaveLength(1);
    expect((await t.admin('GET', `/api/rollouts/${encodeURIComponent(id)}/calls`)).body.items).toHaveLength(1);
  });

  it('refuses a longer id at creation, naming the limit', async () => {
    const res = await t.admin('POST', '/api/rollouts', { id: 'x'.repeat(ROLLOUT_ID_MAX_LENGTH + 1) });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain(`at most ${ROLLOUT_ID_MAX_LENGTH}`);
  });
});
