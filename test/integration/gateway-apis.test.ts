import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import type { MessageParam, Tool } from '@anthropic-ai/sdk/resources/messages/messages';
import type { FunctionTool, ResponseInputItem } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';
import { ChatTokenizer } from '../../src/tokenizer/chat-tokenizer.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { expectOneTrainedSequence } from '../helpers/trained-sequence.js';

/**
 * The Responses and Anthropic Messages APIs through the gateway, from their official SDKs, to the
 * embedded policy server: the gateway asks the backend chat completions, so every call is
 * journaled with the engine's token ids and log-probs, and a multi-turn tool rollout is one
 * training sequence. The warm-started base policy (models/base) calls its calculator greedily for
 * a product, so the tool calls come from the model itself.
 */
const base = path.resolve(import.meta.dirname, '../../models/base');
let server: PolicyServer;
let t: TestGateway;
let tokenizer: ChatTokenizer;

beforeAll(async () => {
  server = await startPolicyServer({ host: '127.0.0.1', port: 0, models: { base } });
  t = await startTestGateway();
  t.gateway.router.update({
    backends: { embedded: { endpoints: [server.url], tokenIds: true, logprobs: true } },
    policies: { base: { backend: 'embedded', model: 'base' } },
    aliases: { production: 'base' },
  });
  tokenizer = ChatTokenizer.fromDirectory(base);
});
afterAll(async () => {
  await t?.close();
  await server?.close();
});

const question = 'What is 17*23?';

describe('the Responses API through the gateway (openai SDK)', () => {
  const tools: FunctionTool[] = [
    {
      type: 'function',
      name: 'calc',
      strict: false,
      parameters: { type: 'object', properties: { x: { type: 'string' } } },
    },
  ];
  const ask = { model: 'production', temperature: 0, max_output_tokens: 40, tools } as const;

  it('journals a tool round trip chained with previous_response_id as one sequence', async () => {
    const { id, client } = await t.rollout();
    const first = await client.responses.create({ ...ask, input: question });
    const call = first.output.find((item) => item.type === 'function_call');
    expect(call).toMatchObject({ type: 'function_call', name: 'calc' });
    const output: ResponseInputItem = { type: 'function_call_output', call_id: call!.call_id, output: '391' };
    // The backend keeps no responses: the gateway expands the chain from its journal.
    const second = await client.responses.create({ ...ask, previous_response_id: first.id, input: [output] });
    expect(second.status).toBe('completed');
    expect(second.output.length).toBeGreaterThan(0);
    expectOneTrainedSequence(id, await t.store.listCalls(id), 'responses', tokenizer);
  });

  it('streams the typed events, and the journal keeps the answer they told', async () => {
    const { id, client } = await t.rollout();
    const types: string[] = [];
    let completed: unknown;
    const stream = await client.responses.create({ ...ask, input: question, stream: true });
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.completed') completed = event.response;
    }
    expect(types.slice(0, 2)).toEqual(['response.created', 'response.in_progress']);
    expect(types).toContain('response.function_call_arguments.delta');
    expect(types.at(-1)).toBe('response.completed');
    const [call] = await t.store.listCalls(id);
    expect(call?.response).toEqual(completed);
    expectOneTrainedSequence(id, [call!], 'responses', tokenizer);
  });

  it('refuses an unknown previous_response_id, in OpenAI error shape', async () => {
    const { client } = await t.rollout();
    await expect(
      client.responses.create({ ...ask, previous_response_id: 'resp_nope', input: 'hi' }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringContaining("'resp_nope' not found") });
  });
});

describe('the Messages API through the gateway (Anthropic SDK)', () => {
  const tools: Tool[] = [{ name: 'calc', input_schema: { type: 'object', properties: { x: { type: 'string' } } } }];
  const ask = { model: 'production', max_tokens: 40, temperature: 0, tools } as const;
  const anthropic = (baseUrl: string, key: string) =>
    new Anthropic({ apiKey: key, baseURL: baseUrl.replace(/\/v1$/, ''), maxRetries: 0 });

  it('journals a tool_use / tool_result round trip as one sequence, the key sent as x-api-key', async () => {
    const { id, key, baseUrl } = await t.rollout();
    const client = anthropic(baseUrl, key);
    const messages: MessageParam[] = [{ role: 'user', content: question }];
    const first = await client.messages.create({ ...ask, messages });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((block) => block.type === 'tool_use');
    messages.push(
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use!.id, content: '391' }] },
    );
    const second = await client.messages.create({ ...ask, messages });
    expect(second.type).toBe('message');
    expectOneTrainedSequence(id, await t.store.listCalls(id), 'messages', tokenizer);
  });

  it('streams message_start … message_stop, and finalMessage equals the journaled answer', async () => {
    const { id, key, baseUrl } = await t.rollout();
    const stream = anthropic(baseUrl, key).messages.stream({ ...ask, messages: [{ role: 'user', content: question }] });
    const final = await stream.finalMessage();
    const [call] = await t.store.listCalls(id);
    const { parsed_output: _sdkOnly, ...told } = JSON.parse(JSON.stringify(final)) as Record<string, unknown>;
    expect(call?.response).toEqual(told);
    expectOneTrainedSequence(id, [call!], 'messages', tokenizer);
  });

  it("answers a wrong key in Anthropic's error shape", async () => {
    const { baseUrl } = await t.rollout();
    const res = await fetch(`${baseUrl}/messages`, {
      method: 'POST',
      headers: { 'x-api-key': 'not-a-key', 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ ...ask, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
  });
});
