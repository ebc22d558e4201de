import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL } from '../helpers/vllm-like-server.js';
import { FAULT_MODELS, routingFor, startTestGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * Harnesses often hard-code a vendor's model name. A rollout Rein pinned to a version (training,
 * held-out replay) is served by that version whatever name it sends, on every API; unpinned calls
 * to a name the gateway does not serve get a 404 that lists what it serves, or go to
 * `gateway.defaultModel` where one is set. Official SDKs, as harnesses use them.
 */
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
  t.backend.adapters.set('lora-v2', '/adapters/lora-v2');
  t.gateway.router.registerPolicy('policy-v2', { backend: 'toy', model: 'lora-v2' });
});
afterAll(() => t?.close());

const VENDOR = 'gpt-4o-mini';
const messages = [{ role: 'user' as const, content: 'hi' }];

describe('model names the gateway does not serve', () => {
  it('serves a pinned rollout its version on chat, completions, responses and messages; the journal keeps the name sent', async () => {
    const r = await t.rollout({ policyVersion: 'policy-v2' });
    const chat = await r.client.chat.completions.create({ model: VENDOR, messages, max_tokens: 4 });
    expect(chat.choices[0]?.message.content).toBeTruthy();
    await r.client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'hi', max_tokens: 4 });
    await r.client.responses.create({ model: 'gpt-4.1', input: 'hi', max_output_tokens: 16 });
    const anthropic = new Anthropic({ apiKey: r.key, baseURL: r.baseUrl.replace(/\/v1$/, ''), maxRetries: 0 });
    await anthropic.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 4, messages });

    const calls = await t.store.listCalls(r.id);
    expect(calls.map((c) => [c.endpoint, c.status, c.policyVersion])).toEqual([
      ['chat.completions', 'ok', 'policy-v2'],
      ['completions', 'ok', 'policy-v2'],
      ['responses', 'ok', 'policy-v2'],
      ['messages', 'ok', 'policy-v2'],
    ]);
    expect(calls.map((c) => (c.requestReceived as { model: string }).model)).toEqual([
      VENDOR,
      'gpt-3.5-turbo-instruct',
      'gpt-4.1',
      'claude-sonnet-4-5',
    ]);
    // The backend was asked for the version's own model.
    expect((calls[0]?.requestSent as { model: string }).model).toBe('lora-v2');
  });

  it('answers an unpinned call to an unknown name with a 404 that lists the names served', async () => {
    const r = await t.rollout();
    const err = await r.client.chat.completions.create({ model: VENDOR, messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    const { message } = (err as InstanceType<typeof OpenAI.NotFoundError>).error as { message: string };
    expect(message).toContain(`The model \`${VENDOR}\` does not exist`);
    for (const name of ['production', 'policy-v1', 'policy-v2']) expect(message).toContain(name);
    expect(message).toContain('gateway.defaultModel');
  });

  it('serves unknown names of unpinned calls with gateway.defaultModel when it is set', async () => {
    const table = routingFor(t.backend.url, FAULT_MODELS);
    t.gateway.router.update({ ...table, defaultModel: 'production' });
    try {
      const r = await t.rollout();
      await r.client.chat.completions.create({ model: VENDOR, messages, max_tokens: 4 });
      const [call] = await t.store.listCalls(r.id);
      expect(call?.policyVersion).toBe('policy-v1');
      expect((call?.requestSent as { model: string }).model).toBe(MODEL);
    } finally {
      t.gateway.router.update(table);
    }
  });
});

describe("a backend's refusal", () => {
  const refusal =
    "This model's maximum context length is 1024 tokens. However, you requested 2658 tokens (2558 in the messages, " +
    '100 in the completion). Please reduce the length of the messages or completion. Key sk-proj-';
  it("journals the backend's own words, redacted and cut, beside its status", async () => {
    t.backend.scripts.set('too-long', (res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          object: 'error',
          message: `${refusal}${'a'.repeat(40)} ${'x'.repeat(2000)}`,
          type: 'BadRequestError',
          param: null,
          code: 400,
        }),
      );
    });
    t.gateway.router.registerPolicy('too-long', { backend: 'toy', model: 'too-long' });
    const r = await t.rollout({ policyVersion: 'too-long' });
    const err = await r.client.chat.completions.create({ model: VENDOR, messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    const [call] = await t.store.listCalls(r.id);
    expect(call).toMatchObject({ status: 'error', errorClass: 'upstream_http_error', upstreamStatus: 400 });
    expect(call?.errorMessage).toMatch(/^the backend answered 400: This model's maximum context length is 1024 tokens/);
    expect(call?.errorMessage).not.toContain(`sk-proj-${'a'.repeat(40)}`);
    expect(call?.errorMessage?.length).toBeLessThan(600);
    expect(call?.errorMessage).toMatch(/…$/);
  });
});
