import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import type { MessageParam, Tool } from '@anthropic-ai/sdk/resources/messages/messages';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { messagesTranslation } from '../../src/apis/messages/index.js';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';

/**
 * The Anthropic Messages API on the embedded policy server, through the official `@anthropic-ai/sdk`
 * client: whole, streamed, and a tool round trip. The warm-started base policy (models/base) calls
 * its calculator greedily for a product, so tool calls come from the model itself.
 */
let server: PolicyServer;
let client: Anthropic;
const ADMIN = 'messages-admin-key';

beforeAll(async () => {
  const base = path.resolve(import.meta.dirname, '../../models/base');
  server = await startPolicyServer({ host: '127.0.0.1', port: 0, models: { base }, adminKey: ADMIN });
  // The SDK appends /v1/messages to the base URL and sends its key as x-api-key.
  client = new Anthropic({ apiKey: ADMIN, baseURL: server.url.replace(/\/v1$/, ''), maxRetries: 0 });
});
afterAll(() => server.close());

const tools: Tool[] = [{ name: 'calc', input_schema: { type: 'object', properties: { x: { type: 'string' } } } }];
const question: MessageParam[] = [{ role: 'user', content: 'What is 17*23?' }];
const ask = { model: 'base', max_tokens: 40, temperature: 0, messages: question, tools } as const;

describe('the Messages API on the embedded policy server, through the Anthropic SDK', () => {
  it('answers a plain request with a Message', async () => {
    const message = await client.messages.create({
      model: 'base',
      max_tokens: 6,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(message).toMatchObject({ type: 'message', role: 'assistant', model: 'base' });
    expect(message.id).toMatch(/^msg_/);
    expect(['end_turn', 'max_tokens']).toContain(message.stop_reason);
    expect(message.usage.input_tokens).toBeGreaterThan(0);
    expect(message.usage.output_tokens).toBeGreaterThan(0);
    expect(JSON.stringify(message)).not.toMatch(/token_ids/);
  });

  it('streams events, and the stream helper gives the Message the whole call gives', async () => {
    const whole = await client.messages.create(ask);
    expect(whole.stop_reason).toBe('tool_use');
    const events: string[] = [];
    for await (const event of await client.messages.create({ ...ask, stream: true })) events.push(event.type);
    expect(events[0]).toBe('message_start');
    expect(events.slice(-2)).toEqual(['message_delta', 'message_stop']);
    expect(events).toContain('content_block_start');

    // finalMessage() adds the SDK's own `parsed_output` (structured outputs): not the server's.
    const { parsed_output: _parsed, ...final } = await client.messages.stream(ask).finalMessage();
    const strip = (m: typeof whole) => ({
      ...m,
      id: '',
      content: m.content.map((b) => (b.type === 'tool_use' ? { ...b, id: '' } : b)),
    });
    expect(strip(final)).toEqual(strip(whole));
  });

  it('takes a tool round trip: tool_use from the model, then its tool_result', async () => {
    const first = await client.messages.create(ask);
    const call = first.content.find((b) => b.type === 'tool_use');
    expect(call).toMatchObject({ type: 'tool_use', name: 'calc', input: { x: expect.any(String) } });
    const next = await client.messages.create({
      ...ask,
      messages: [
        ...question,
        { role: 'assistant', content: first.content },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: call!.type === 'tool_use' ? call!.id : '', content: '391' }],
        },
      ],
    });
    expect(next.type).toBe('message');
    expect(next.usage.input_tokens).toBeGreaterThan(first.usage.input_tokens + first.usage.output_tokens - 1);
  });

  it("refuses in Anthropic's shape, which the SDK raises as its own errors", async () => {
    const noModel = client.messages.create({ ...ask, model: 'nope' });
    await expect(noModel).rejects.toBeInstanceOf(Anthropic.NotFoundError);
    const image = { type: 'image' as const, source: { type: 'url' as const, url: 'https://example.com/a.png' } };
    const err = await client.messages
      .create({ ...ask, messages: [{ role: 'user', content: [image] }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as InstanceType<typeof Anthropic.BadRequestError>).error).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringMatching(/content block type "image"/) },
    });
    const raw = await fetch(`${server.url}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': ADMIN },
      body: JSON.stringify({ model: 'base', messages: question }),
    });
    expect(raw.status).toBe(400);
    expect(await raw.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'max_tokens: Field required' },
    });
    const notJson = await fetch(`${server.url}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"model": ',
    });
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    const countTokens = client.messages.countTokens({ model: 'base', messages: question });
    await expect(countTokens).rejects.toBeInstanceOf(Anthropic.NotFoundError);
  });

  it('takes the admin key as x-api-key where the server checks keys', async () => {
    const unload = (headers: Record<string, string>) =>
      fetch(`${server.url}/unload_lora_adapter`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ lora_name: 'never-loaded' }),
      });
    expect((await unload({ 'x-api-key': 'wrong' })).status).toBe(401);
    expect((await unload({ 'x-api-key': ADMIN })).status).not.toBe(401);
  });
});

describe('Messages translated to chat keep the merge property', () => {
  it("a two-turn tool conversation's second prompt starts with the first prompt and completion", async () => {
    type WithIds = {
      prompt_token_ids: number[];
      choices: Array<{ token_ids: number[]; message: { content: string | null } }>;
    };
    const chat = async (messages: MessageParam[]) => {
      const body = { ...messagesTranslation.toChat({ ...ask, messages }), return_token_ids: true };
      const res = await fetch(`${server.url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(200);
      return (await res.json()) as WithIds & Parameters<typeof messagesTranslation.fromChat>[0];
    };
    const first = await chat(question);
    const answer = messagesTranslation.fromChat(first, ask);
    const call = answer.content.find((b) => b.type === 'tool_use');
    expect(call?.type).toBe('tool_use');
    const second = await chat([
      ...question,
      { role: 'assistant', content: answer.content },
      {
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: call!.type === 'tool_use' ? call!.id : '', content: '391' }],
      },
    ]);
    const sequence = [...first.prompt_token_ids, ...(first.choices[0]?.token_ids ?? [])];
    expect(second.prompt_token_ids.slice(0, sequence.length)).toEqual(sequence);
  });
});
