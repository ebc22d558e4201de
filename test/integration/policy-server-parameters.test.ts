import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { specialTokenId } from '../../src/policy/chat-format.js';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';

/**
 * Request parameters through the real policy server and the official `openai` client: each one
 * honored or refused with a 400 naming it. The warm-started base policy (models/base) calls its
 * calculator greedily for a product, so tool calls come from the model itself.
 */
let server: PolicyServer;
let client: OpenAI;

beforeAll(async () => {
  const base = path.resolve(import.meta.dirname, '../../models/base');
  server = await startPolicyServer({ host: '127.0.0.1', port: 0, models: { base } });
  client = new OpenAI({ apiKey: 'unused', baseURL: server.url, maxRetries: 0 });
});
afterAll(() => server.close());

const tools = [
  {
    type: 'function' as const,
    function: { name: 'calc', parameters: { type: 'object', properties: { x: { type: 'string' } } } },
  },
];
const messages = [{ role: 'user' as const, content: 'What is 17*23?' }];
const ask = { model: 'base', messages, tools, temperature: 0, max_tokens: 40 };
const withIds = { return_token_ids: true } as object;
type WithIds = { prompt_token_ids: number[]; choices: Array<{ token_ids: number[] }> };

describe('the embedded policy server honors or refuses each parameter', () => {
  it('gives each tool call its own id, the same one in the stream, and the next turn extends the last', async () => {
    const [first, second] = await Promise.all([
      client.chat.completions.create({ ...ask, ...withIds }),
      client.chat.completions.create(ask),
    ]);
    const call = first.choices[0]?.message.tool_calls?.[0];
    expect(call?.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
    expect(second.choices[0]?.message.tool_calls?.[0]?.id).not.toBe(call?.id);
    const stream = await client.chat.completions.create({ ...ask, stream: true });
    const ids: string[] = [];
    for await (const chunk of stream) for (const c of chunk.choices[0]?.delta.tool_calls ?? []) ids.push(c.id ?? '');
    expect(ids).toEqual([expect.stringMatching(/^chatcmpl-tool-[0-9a-f]{32}$/)]);

    const next = (await client.chat.completions.create({
      ...ask,
      ...withIds,
      messages: [...messages, first.choices[0]!.message, { role: 'tool', tool_call_id: call!.id, content: '391' }],
    })) as unknown as WithIds;
    const turn = first as unknown as WithIds;
    const sequence = [...turn.prompt_token_ids, ...(turn.choices[0]?.token_ids ?? [])];
    expect(next.prompt_token_ids.slice(0, sequence.length)).toEqual(sequence);
  });

  it('gives top_logprobs alternatives with text, log-prob and bytes, on chat and completions', async () => {
    const chat = await client.chat.completions.create({ ...ask, logprobs: true, top_logprobs: 3, max_tokens: 6 });
    const content = chat.choices[0]?.logprobs?.content ?? [];
    expect(content.length).toBeGreaterThan(0);
    for (const token of content) {
      expect(token.top_logprobs).toHaveLength(3);
      expect(token.top_logprobs[0]).toEqual({ token: token.token, logprob: token.logprob, bytes: token.bytes });
      const logprobs = token.top_logprobs.map((t) => t.logprob);
      expect(logprobs).toEqual([...logprobs].sort((a, b) => b - a));
    }
    const completion = await client.completions.create({ model: 'base', prompt: '12+', max_tokens: 4, logprobs: 2 });
    const top = completion.choices[0]?.logprobs?.top_logprobs ?? [];
    expect(top).toHaveLength(completion.choices[0]?.logprobs?.tokens?.length ?? -1);
    for (const step of top) expect(Object.keys(step).length).toBeGreaterThanOrEqual(2);
  });

  it('never calls a tool under tool_choice none, and makes at most one call without parallel calls', async () => {
    const auto = await client.chat.completions.create({ ...ask, ...withIds });
    expect(auto.choices[0]?.finish_reason).toBe('tool_calls');
    const none = (await client.chat.completions.create({
      ...ask,
      ...withIds,
      tool_choice: 'none',
    })) as unknown as WithIds & OpenAI.ChatCompletion;
    expect(none.choices[0]?.message.tool_calls).toBeUndefined();
    expect(none.choices[0]?.token_ids).not.toContain(specialTokenId('<tool_call>'));
    expect(none.prompt_token_ids).toEqual((auto as unknown as WithIds).prompt_token_ids);
    const single = await client.chat.completions.create({ ...ask, parallel_tool_calls: false, n: 4, temperature: 1 });
    for (const choice of single.choices) expect(choice.message.tool_calls?.length ?? 0).toBeLessThanOrEqual(1);
  });

  it('refuses with a 400 naming it what it cannot honor', async () => {
    const refused = async (fields: object, named: RegExp) =>
      expect(client.chat.completions.create({ ...ask, ...fields })).rejects.toMatchObject({
        status: 400,
        message: expect.stringMatching(named),
      });
    await refused({ tool_choice: { type: 'function', function: { name: 'sum' } } }, /"sum", which is not among/);
    await refused({ response_format: { type: 'regex', regex: 'a+' } }, /response_format.*"regex" is not supported/);
    const schema = {
      type: 'json_schema',
      json_schema: { name: 'n', schema: { type: 'string', format: 'date' }, strict: true },
    };
    await refused({ response_format: schema }, /"format" is not enforced/);
    await refused({ store: true, logit_bias: { 1: 2 } }, /^400 store, logit_bias: not supported/);
    await refused({ top_logprobs: 2 }, /top_logprobs: needs logprobs/);
  });
});
