import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROLLOUT_ID_MAX_LENGTH } from '../../src/rollouts/rollout-id.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(() => t.close());

const ask = (client: OpenAI, content = 'hi') =>
  client.chat.completions.create({ model: 'production', messages: [{ role: 'user', content }] });

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
    const stale = await postEvent(
      id,
      { type: 'span', actionId: 'rm-1', name: 'rm -rf', kind: 'action', irreversible: true, failure: 'deleted' },
      key,
    );
    expect(stale.status).toBe(409);
    expect(stale.body.error).toMatchObject({
      code: 'attempt_superseded',
      message: expect.stringContaining('superseded by attempt 2'),
    });
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

  it('serves the control routes of a policy version or alias of the longest name the routing table takes', async () => {
    const version = `v${'x'.repeat(199)}`;
    expect((await t.admin('PUT', `/api/policies/${version}`, { backend: 'toy', model: 'toy-model' })).status).toBe(200);
    expect((await t.admin('GET', `/api/policies/${version}/ready`)).status).toBe(200);
    const alias = `a${'y'.repeat(199)}`;
    expect((await t.admin('PUT', `/api/aliases/${alias}`, { policyVersion: version })).status).toBe(200);
  });

  it('refuses a longer id at creation, naming the limit', async () => {
    const res = await t.admin('POST', '/api/rollouts', { id: 'x'.repeat(ROLLOUT_ID_MAX_LENGTH + 1) });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain(`at most ${ROLLOUT_ID_MAX_LENGTH}`);
  });
});

describe('redacted text keeps no token ids that spell it', () => {
  const secret = 'sk-live-abcdefghijklmnopqrstuvwx';
  // The test backend's tokenizer is one id per character: ids decode by String.fromCharCode.
  const decodes = (ids: readonly number[] | null | undefined) => String.fromCharCode(...(ids ?? []));
  // The per-token strings of the journaled response's log-probs, joined (one token per character there too).
  const tokenText = (response: unknown) =>
    JSON.stringify(response)
      .match(/"token":"((?:[^"\\]|\\.)*)"/g)
      ?.map((t) => JSON.parse(t.slice('"token":'.length)) as string)
      .join('') ?? '';

  it('drops the prompt ids of a request with a secret, and the completion ids and log-probs of a reply with one', async () => {
    const { id, client } = await t.rollout();
    await ask(client, `my key is ${secret}`);
    await ask(client, 'nothing secret here');
    const [leaky, clean] = await t.store.listCalls(id);
    expect(JSON.stringify(leaky)).not.toContain(secret);
    expect(decodes(leaky?.promptIds)).not.toContain(secret);
    expect(tokenText(leaky?.response)).not.toContain(secret.slice(3));
    for (const choice of leaky?.choices ?? []) expect(decodes(choice.completionIds)).not.toContain(secret);
    expect(leaky).toMatchObject({
      promptIds: null,
      choices: [{ completionIds: null, logprobs: null, finishReason: 'stop' }],
    });
    expect(leaky?.response).toMatchObject({
      choices: [{ message: { content: 'Echo: my key is [REDACTED:openai-key]' } }],
    });
    // What had nothing to redact keeps every id.
    expect(decodes(clean?.choices?.[0]?.completionIds)).toBe('Echo: nothing secret here');
    expect(clean?.promptIds?.length).toBeGreaterThan(0);
  });

  it('does the same for a streamed reply and for the completions endpoint', async () => {
    const { id, client } = await t.rollout();
    // The harness asks for log-probs here, so the journaled reply would hold the per-token strings.
    const stream = await client.chat.completions.create({
      model: 'production',
      stream: true,
      logprobs: true,
      messages: [{ role: 'user', content: `key ${secret}` }],
    });
    for await (const _ of stream);
    await client.completions.create({ model: 'production', prompt: `key ${secret}`, max_tokens: 64, logprobs: 1 });
    const [streamed, completion] = await t.store.listCalls(id);
    for (const call of [streamed, completion]) {
      expect(call?.status).toBe('ok');
      expect(call?.promptIds).toBeNull();
      expect(JSON.stringify(call)).not.toContain(secret);
      expect(tokenText(call?.response)).not.toContain(secret.slice(3));
    }
    // The chat reply echoes the key; the completion's (the prompt's last characters, upper-cased) does not.
    expect(streamed?.choices).toEqual([{ completionIds: null, logprobs: null, finishReason: 'stop' }]);
    expect(decodes(completion?.choices?.[0]?.completionIds)).toBe(' -> OPQRSTUVWX');
  });
});

describe('redaction of what the control API journals', () => {
  const secret = 'sk-live-abcdefghijklmnopqrstuvwx';
  const aws = 'AKIAABCDEFGHIJKLMNOP';

  it('removes secrets from rollout metadata, status reasons and evidence, reopen reasons and every kind of event', async () => {
    const created = await t.admin('POST', '/api/rollouts', {
      metadata: { env: { OPENAI_API_KEY: secret }, note: `aws ${aws}` },
    });
    expect(created.status).toBe(201);
    const { id } = created.body.rollout as { id: string };
    const key = created.body.key as string;
    const events = [
      {
        type: 'span',
        actionId: 'a-1',
        name: 'shell',
        input: { command: `curl -H "Authorization: Bearer ${secret}"` },
        output: `ok ${aws}`,
        failure: `denied ${secret}`,
      },
      { type: 'custom', name: 'env', data: { dump: [`KEY=${secret}`] } },
      { type: 'reward', value: 1, data: { judge: `used ${secret}` } },
      { type: 'intervention', reason: `pasted ${secret}`, data: { by: aws } },
    ];
    for (const event of events) expect((await postEvent(id, event, key)).status).toBe(201);
    // The runner sends a crashed harness's log tail as evidence.
    const failed = await t.admin('POST', `/api/rollouts/${id}/status`, {
      status: 'failed',
      failureClass: 'infrastructure',
      reason: `harness exited 1: invalid key ${secret}`,
      evidence: { exitCode: 1, stderrTail: `Error: 401 for key ${secret}\nAWS ${aws}` },
    });
    expect(failed.status).toBe(200);
    expect(
      (await t.admin('POST', `/api/rollouts/${id}/reopen`, { reason: `run again, key was ${secret}` })).status,
    ).toBe(201);

    const journaled = JSON.stringify([await t.store.getRollout(id), await t.store.listEvents(id)]);
    expect(journaled).not.toContain(secret);
    expect(journaled).not.toContain(aws);
    expect(journaled).toContain('harness exited 1: invalid key [REDACTED:openai-key]');
    expect(journaled).toContain('Error: 401 for key [REDACTED:openai-key]');
    expect(journaled.match(/\[REDACTED:/g)?.length).toBeGreaterThanOrEqual(12);
    expect((await t.store.getRollout(id))?.metadata).toEqual({
      env: { OPENAI_API_KEY: '[REDACTED:openai-key]' },
      note: 'aws [REDACTED:aws-access-key]',
    });
  });
});
