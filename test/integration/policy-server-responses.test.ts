import path from 'node:path';
import OpenAI from 'openai';
import type { ChatCompletion } from 'openai/resources/chat/completions';
import type {
  Response,
  ResponseCreateParamsNonStreaming,
  ResponseInputItem,
  ResponseStreamEvent,
} from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromChat, toChat } from '../../src/apis/responses/index.js';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';

/**
 * The Responses API of the embedded policy server, through the official `openai` client: plain,
 * streamed (events and the SDK's own accumulation), with a function tool and the follow-up call
 * that sends the function call and its output back. The warm-started base policy (models/base)
 * calls its calculator greedily for a product, so the tool call comes from the model itself.
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
    name: 'calc',
    parameters: { type: 'object', properties: { x: { type: 'string' } } },
    strict: null,
  },
];
const question = { role: 'user' as const, content: 'What is 17*23?' };
const ask = {
  model: 'base',
  input: [question],
  tools,
  temperature: 0,
  max_output_tokens: 40,
} satisfies ResponseCreateParamsNonStreaming;

/** An answer less its random ids and time, and less what the SDK adds (output_text, parsed): for comparing. */
function withoutIds(answer: object): unknown {
  const {
    created_at: _created,
    output_text: _text,
    output_parsed: _parsed,
    ...rest
  } = answer as Partial<Response & { output_parsed: unknown }>;
  return JSON.parse(
    JSON.stringify(rest)
      .replace(/"(resp|msg|fc|rs)_[0-9a-f]{32}"/g, '"$1"')
      .replace(/chatcmpl-tool-[0-9a-f]{32}/g, 'call')
      .replace(/,"parsed":null/g, ''),
  ) as unknown;
}

/** The follow-up items: the question, the model's turn as it answered it, and the calculator's result. */
function followUp(first: Pick<Response, 'output'>): ResponseInputItem[] {
  const call = first.output.find((item) => item.type === 'function_call');
  if (!call) throw new Error(`the base policy made no tool call: ${JSON.stringify(first.output)}`);
  return [
    question,
    ...(first.output as ResponseInputItem[]),
    { type: 'function_call_output', call_id: call.call_id, output: '391' },
  ];
}

describe('POST /v1/responses on the embedded policy server', () => {
  it('answers with a function call, and answers the follow-up that sends the call and its output back', async () => {
    const first = await client.responses.create(ask);
    expect(first).toMatchObject({ object: 'response', status: 'completed', model: 'base', tools, temperature: 0 });
    expect(first.id).toMatch(/^resp_[0-9a-f]{32}$/);
    const call = first.output.find((item) => item.type === 'function_call');
    expect(call).toMatchObject({ type: 'function_call', name: 'calc', status: 'completed' });
    expect(call?.id).toMatch(/^fc_[0-9a-f]{32}$/);
    expect(call?.call_id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
    expect(() => JSON.parse(call!.arguments) as unknown).not.toThrow();
    expect(first.usage?.total_tokens).toBe((first.usage?.input_tokens ?? 0) + (first.usage?.output_tokens ?? 0));
    expect(JSON.stringify(first)).not.toMatch(/token_ids/);

    const second = await client.responses.create({ ...ask, input: followUp(first) });
    expect(['completed', 'incomplete']).toContain(second.status);
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens + first.usage!.output_tokens);
  });

  it('streams typed events numbered from 0 that end with the answer a plain call gives', async () => {
    const plain = await client.responses.create(ask);
    const stream = await client.responses.create({ ...ask, stream: true });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[0]?.type).toBe('response.created');
    expect(events[1]?.type).toBe('response.in_progress');
    const last = events.at(-1);
    expect(last?.type).toBe('response.completed');
    const streamed = (last as Extract<ResponseStreamEvent, { type: 'response.completed' }>).response;
    expect(events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item)).toEqual(streamed.output);
    expect(withoutIds(streamed)).toEqual(withoutIds(plain));
  });

  it("gives the SDK's streaming helper a final response equal to a plain call's", async () => {
    const plain = await client.responses.create({ ...ask, tools: [], input: 'Say hi' });
    const final = await client.responses.stream({ ...ask, tools: [], input: 'Say hi' }).finalResponse();
    // The SDK adds output_text to a streamed answer only when it parses structured output: read the items.
    const texts = final.output.flatMap((item) => (item.type === 'message' ? item.content : []));
    expect(texts.map((part) => (part.type === 'output_text' ? part.text : '')).join('')).toBe(plain.output_text);
    expect(plain.output_text).not.toBe('');
    expect(withoutIds(final)).toEqual(withoutIds(plain));
  });

  it('gives log-probs with top alternatives when asked, the same streamed as plain', async () => {
    const asked = {
      ...ask,
      tools: [],
      input: 'Say hi',
      max_output_tokens: 6,
      include: ['message.output_text.logprobs' as const],
      ...({ top_logprobs: 2 } as object),
    };
    const plain = await client.responses.create(asked);
    const [message] = plain.output;
    const part = message?.type === 'message' ? message.content[0] : undefined;
    const logprobs = part?.type === 'output_text' ? (part.logprobs ?? []) : [];
    expect(logprobs.length).toBe(plain.usage?.output_tokens);
    for (const token of logprobs) expect(token.top_logprobs).toHaveLength(2);
    const final = await client.responses.stream(asked).finalResponse();
    expect(withoutIds(final)).toEqual(withoutIds(plain));
  });

  it("refuses what it cannot honor in OpenAI's error shape, naming the field", async () => {
    const refused = async (fields: object, status: number, message: RegExp) => {
      const err = (await client.responses.create({ ...ask, ...fields }).catch((e: unknown) => e)) as InstanceType<
        typeof OpenAI.APIError
      >;
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect(err.status).toBe(status);
      expect(err.error).toMatchObject({
        type: status >= 500 ? 'server_error' : 'invalid_request_error',
        message: expect.stringMatching(message),
      });
    };
    await refused(
      { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png', detail: 'auto' }] }] },
      400,
      /"input_image"/,
    );
    await refused({ previous_response_id: 'resp_1' }, 400, /keeps no responses/);
    await refused({ tools: [{ type: 'web_search' }] }, 400, /"web_search"/);
    await refused({ model: 'nope' }, 404, /nope/);
    await refused({ temperature: 50 }, 400, /temperature/);
  });
});

describe('Responses items through the chat translation keep the token-prefix merge', () => {
  it("renders the second call's prompt as the first call's prompt and completion, token for token", async () => {
    type WithIds = ChatCompletion & { prompt_token_ids: number[]; choices: Array<{ token_ids: number[] }> };
    const chat = async (body: object) => {
      const res = await fetch(`${server.url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...body, return_token_ids: true, seed: 7 }),
      });
      expect(res.status).toBe(200);
      return (await res.json()) as WithIds;
    };
    const firstChat = await chat(toChat(ask));
    // As the gateway does: the chat answer becomes the Responses answer the harness sends back as items.
    const first = fromChat(firstChat, ask);
    const secondChat = await chat(toChat({ ...ask, input: followUp(first) }));
    const sequence = [...firstChat.prompt_token_ids, ...(firstChat.choices[0]?.token_ids ?? [])];
    expect(secondChat.prompt_token_ids.slice(0, sequence.length)).toEqual(sequence);
  });
});
