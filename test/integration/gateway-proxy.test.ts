import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAULT_MODELS, routingFor, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { logprobOf, MODEL, renderChat, tokenize } from '../helpers/vllm-like-server.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(() => t.close());

const tools = [
  {
    type: 'function' as const,
    function: {
      name: 'calculator',
      description: 'evaluates arithmetic',
      parameters: { type: 'object', properties: { expression: { type: 'string' } } },
    },
  },
];

/** The same request straight to the backend, as the harness would see it without Rein. */
function direct(): OpenAI {
  return new OpenAI({ apiKey: 'unused', baseURL: t.backend.url, maxRetries: 0 });
}

describe('gateway: chat completions through the official openai client', () => {
  it('answers exactly as the backend would, and journals prompt ids, completion ids and log-probs', async () => {
    const { id, client } = await t.rollout({ taskId: 'task-1' });
    const messages = [
      { role: 'system' as const, content: 'You are terse.' },
      { role: 'user' as const, content: 'hello there' },
    ];
    const viaGateway = await client.chat.completions.create({ model: 'production', messages });
    const straight = await direct().chat.completions.create({ model: MODEL, messages });

    expect({ ...viaGateway, model: MODEL }).toEqual(straight);
    expect(viaGateway).not.toHaveProperty('prompt_token_ids');

    const [call] = await t.store.listCalls(id);
    const reply = 'Echo: hello there';
    expect(call).toMatchObject({
      seq: 1,
      attempt: 1,
      status: 'ok',
      endpoint: 'chat.completions',
      policyVersion: 'policy-v1',
      upstreamStatus: 200,
      promptIds: tokenize(renderChat(messages)),
      usage: { completion_tokens: reply.length },
      requestReceived: { model: 'production', messages },
      requestSent: { model: MODEL, return_token_ids: true, logprobs: true },
    });
    expect(call?.choices).toEqual([
      {
        completionIds: tokenize(reply),
        logprobs: tokenize(reply).map((i) => expect.closeTo(logprobOf(i), 5)),
        finishReason: 'stop',
      },
    ]);
    expect(call?.response).toMatchObject({ choices: [{ message: { content: reply }, logprobs: null }] });
    expect((await t.store.getRollout(id))?.status).toBe('running');
  });

  it('streams chunk by chunk, hides what it added, and journals the assembled response', async () => {
    const slow = await startTestGateway({ backend: { chunkDelayMs: 15, chunkSize: 2 } });
    try {
      const { id, client } = await slow.rollout();
      const stream = await client.chat.completions.create({
        model: 'production',
        messages: [{ role: 'user', content: 'a longer message to stream back' }],
        stream: true,
      });
      const received: string[] = [];
      let chunksBeforeUpstreamFinished = 0;
      const raw: unknown[] = [];
      for await (const chunk of stream) {
        raw.push(chunk);
        received.push(chunk.choices[0]?.delta.content ?? '');
        // The backend is still generating while the harness already holds chunks.
        if ((await slow.store.getCall((await slow.store.listCalls(id))[0]!.id))?.status === 'in_flight')
          chunksBeforeUpstreamFinished++;
      }
      const text = received.join('');
      expect(text).toBe('Echo: a longer message to stream back');
      expect(chunksBeforeUpstreamFinished).toBeGreaterThan(5);
      expect(JSON.stringify(raw)).not.toMatch(/token_ids|"usage"|logprob":/);

      const [call] = await slow.store.listCalls(id);
      expect(call).toMatchObject({
        stream: true,
        status: 'ok',
        promptIds: tokenize(renderChat([{ role: 'user', content: 'a longer message to stream back' }])),
        // Usage the harness did not ask for is not asked for (a backend must not send more than asked): the journal
        // counts the ids.
        usage: { completion_tokens: text.length, prompt_tokens: call?.promptIds?.length },
        response: {
          object: 'chat.completion',
          choices: [{ message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
        },
      });
      expect(call?.requestSent).not.toHaveProperty('stream_options');
      expect(call?.choices?.[0]?.completionIds).toEqual(tokenize(text));
      expect(call?.choices?.[0]?.logprobs).toHaveLength(text.length);
      expect(call?.ttftMs).toBeLessThan(call?.latencyMs ?? 0);
    } finally {
      await slow.close();
    }
  });

  it('passes through usage and token ids when the harness asks for them itself', async () => {
    const { client } = await t.rollout();
    const stream = await client.chat.completions.create({
      model: 'production',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
      // A vLLM extension, passed as a harness would pass it.
      ...({ return_token_ids: true } as object),
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk as unknown as Record<string, unknown>);
    expect(chunks.at(-1)?.usage).toMatchObject({ prompt_tokens: expect.any(Number) });
    expect(chunks[0]?.prompt_token_ids).toEqual(tokenize(renderChat([{ role: 'user', content: 'hi' }])));
  });

  it.each([false, true])('relays tool calls (stream=%s) and journals them', async (streaming) => {
    const { id, client } = await t.rollout();
    const request = { model: 'production', messages: [{ role: 'user' as const, content: '6*7' }], tools };
    let toolCall: { name: string; arguments: string } | undefined;
    if (streaming) {
      const stream = await client.chat.completions.create({ ...request, stream: true });
      const args: string[] = [];
      for await (const chunk of stream) {
        const call = chunk.choices[0]?.delta.tool_calls?.[0];
        if (call?.function?.name) toolCall = { name: call.function.name, arguments: '' };
        if (call?.function?.arguments) args.push(call.function.arguments);
      }
      if (toolCall) toolCall.arguments = args.join('');
    } else {
      const completion = await client.chat.completions.create(request);
      const call = completion.choices[0]?.message.tool_calls?.[0];
      toolCall = call?.type === 'function' ? call.function : undefined;
      expect(completion.choices[0]?.finish_reason).toBe('tool_calls');
    }
    expect(toolCall).toEqual({ name: 'calculator', arguments: JSON.stringify({ expression: '6*7' }) });
    const [call] = await t.store.listCalls(id);
    expect(call?.response).toMatchObject({
      choices: [
        {
          finish_reason: 'tool_calls',
          message: { tool_calls: [{ id: 'call_0', type: 'function', function: toolCall }] },
        },
      ],
    });
    expect(call?.choices?.[0]?.completionIds?.length).toBeGreaterThan(10);
  });

  it('keeps every choice of n > 1, with stop sequences and max_tokens as the backend applied them', async () => {
    const { id, client } = await t.rollout();
    const completion = await client.chat.completions.create({
      model: 'production',
      messages: [{ role: 'user', content: 'stop here please' }],
      n: 3,
      stop: ['here'],
    });
    expect(completion.choices.map((c) => c.message.content)).toEqual(['Echo: stop ', 'Echo: stop ', 'Echo: stop ']);
    const limited = await client.chat.completions.create({
      model: 'production',
      messages: [{ role: 'user', content: 'abcdefgh' }],
      max_tokens: 5,
    });
    expect(limited.choices[0]).toMatchObject({ finish_reason: 'length', message: { content: 'Echo:' } });

    const calls = await t.store.listCalls(id);
    expect(calls.map((c) => c.seq)).toEqual([1, 2]);
    expect(calls[0]?.choices?.map((c) => [c.finishReason, c.completionIds?.length])).toEqual([
      ['stop', 11],
      ['stop', 11],
      ['stop', 11],
    ]);
    expect(calls[1]?.choices?.[0]?.finishReason).toBe('length');
  });
});

describe('gateway: completions, responses, models', () => {
  it.each([false, true])('forwards the completions API (stream=%s) with per-choice prompt ids', async (stream) => {
    const { id, client } = await t.rollout();
    let text: string;
    if (stream) {
      const chunks = await client.completions.create({ model: 'policy-v1', prompt: 'count to three', stream: true });
      const parts: string[] = [];
      for await (const chunk of chunks) parts.push(chunk.choices[0]?.text ?? '');
      text = parts.join('');
    } else {
      const completion = await client.completions.create({ model: 'policy-v1', prompt: 'count to three' });
      text = completion.choices[0]?.text ?? '';
      expect(completion.choices[0]).not.toHaveProperty('token_ids');
      expect(completion.choices[0]?.logprobs).toBeNull();
    }
    expect(text).toBe(' -> T TO THREE');
    const [call] = await t.store.listCalls(id);
    expect(call).toMatchObject({
      endpoint: 'completions',
      promptIds: tokenize('count to three'),
      requestSent: { logprobs: 0 },
    });
    expect(call?.choices?.[0]?.completionIds).toEqual(tokenize(text));
    expect(call?.choices?.[0]?.logprobs).toHaveLength(text.length);
  });

  it('asks the backend chat completions for a Responses call, and journals its token ids', async () => {
    const { id, client } = await t.rollout();
    const response = await client.responses.create({ model: 'production', input: 'hi' });
    expect(response.output_text).toBe('Echo: hi');
    const [call] = await t.store.listCalls(id);
    expect(call).toMatchObject({ endpoint: 'responses', status: 'ok', response: { id: response.id } });
    expect(call?.requestSent).toMatchObject({ messages: [{ role: 'user', content: 'hi' }], return_token_ids: true });
    expect(call?.promptIds?.length).toBeGreaterThan(0);
  });

  it('forwards a Responses call as it came to a backend set to serve the API itself (nativeApis)', async () => {
    const routing = routingFor(t.backend.url, FAULT_MODELS);
    t.gateway.router.update({ ...routing, backends: { toy: { ...routing.backends.toy!, nativeApis: ['responses'] } } });
    try {
      const { id, client } = await t.rollout();
      const response = await client.responses.create({ model: 'production', input: 'hi' });
      expect(response.output_text).toBe('ok');
      const [call] = await t.store.listCalls(id);
      expect(call).toMatchObject({ endpoint: 'responses', status: 'ok', response: { id: 'resp-1' }, promptIds: null });
    } finally {
      t.gateway.router.update(routingFor(t.backend.url, FAULT_MODELS));
    }
  });

  it('lists the aliases and policy versions it routes', async () => {
    const { client } = await t.rollout();
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(expect.arrayContaining(['production', 'policy-v1']));
  });
});

describe('gateway: faults reach the harness as the error it would have seen, and are journaled', () => {
  it('passes a backend 500 through and classifies it', async () => {
    const { id, client } = await t.rollout();
    await expect(
      client.chat.completions.create({ model: 'fault:500', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toMatchObject({
      status: 500,
      message: expect.stringContaining('engine crashed'),
    });
    const [call] = await t.store.listCalls(id);
    expect(call).toMatchObject({ status: 'error', upstreamStatus: 500, errorClass: 'upstream_http_error' });
  });

  it.each([
    ['fault:garbage', 502, 'upstream_bad_response'],
    ['fault:reset', 502, 'upstream_unreachable'],
    ['fault:cut', 502, 'upstream_stream_cut'],
  ])('%s → %i (%s)', async (model, status, errorClass) => {
    const { id, client } = await t.rollout();
    await expect(
      client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toMatchObject({ status });
    const [call] = await t.store.listCalls(id);
    expect(call).toMatchObject({ status: 'error', errorClass });
  });

  it('breaks the harness stream when the backend cuts it, and keeps the partial call', async () => {
    const { id, client } = await t.rollout();
    const stream = await client.chat.completions.create({
      model: 'fault:cut',
      messages: [{ role: 'user', content: 'a message long enough to be cut' }],
      stream: true,
    });
    const parts: string[] = [];
    await expect(
      (async () => {
        for await (const chunk of stream) parts.push(chunk.choices[0]?.delta.content ?? '');
      })(),
    ).rejects.toThrow();
    const [call] = await t.store.listCalls(id);
    expect(call).toMatchObject({ status: 'error', errorClass: 'upstream_stream_cut' });
    expect((call?.response as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content).toBe(
      parts.join(''),
    );
  });

  it('answers 504 when the backend does not answer in time', async () => {
    const impatient = await startTestGateway({ gateway: { headersTimeoutMs: 300 } });
    try {
      const { id, client } = await impatient.rollout();
      await expect(
        client.chat.completions.create({ model: 'fault:slow:2500', messages: [{ role: 'user', content: 'x' }] }),
      ).rejects.toMatchObject({ status: 504 });
      expect((await impatient.store.listCalls(id))[0]).toMatchObject({ errorClass: 'upstream_timeout' });
    } finally {
      await impatient.close();
    }
  });

  it('answers 502 naming the backend (by name, not address) when it is down', async () => {
    const { id, client } = await t.rollout();
    t.gateway.router.update({
      ...t.gateway.router['table'],
      backends: {
        ...t.gateway.router['table'].backends,
        dead: { endpoints: ['http://127.0.0.1:1/v1'], tokenIds: true, logprobs: true },
      },
      policies: { ...t.gateway.router['table'].policies, 'dead-v1': { backend: 'dead', model: MODEL } },
    });
    await expect(
      client.chat.completions.create({ model: 'dead-v1', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toMatchObject({
      status: 502,
      message: expect.stringContaining('backend dead is unreachable'),
    });
    const [call] = await t.store.listCalls(id);
    expect(call).toMatchObject({
      errorClass: 'upstream_unreachable',
      upstreamStatus: null,
      errorMessage: expect.stringContaining('ECONNREFUSED'),
    });
  });

  it('names an unknown model as the backend would, then the names it serves', async () => {
    const { client } = await t.rollout();
    const error = await client.chat.completions
      .create({ model: 'gpt-9', messages: [{ role: 'user', content: 'x' }] })
      .catch((err: unknown) => err);
    expect(error).toMatchObject({ status: 404, message: expect.stringContaining('The model `gpt-9` does not exist.') });
    expect((error as Error).message).toContain('Names served here: production, policy-v1');
  });
});
