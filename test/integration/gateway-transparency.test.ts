import net from 'node:net';
import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log/logger.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { MODEL } from '../helpers/vllm-like-server.js';

/**
 * The gateway's promise: a harness needs no change. What it gets through Rein is what the backend
 * would have given it, byte for byte where bytes are what it reads, and nothing a harness or a
 * backend sends can stall, crash or poison the gateway or its journal.
 */
let t: TestGateway;
const logged: Array<Record<string, unknown>> = [];
beforeAll(async () => {
  t = await startTestGateway({
    gateway: {
      logger: createLogger('info', 'gateway', {
        write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>),
      }),
    },
  });
});
afterAll(() => t.close());

/** A model the backend answers with `script`, routed by the gateway like any version. */
function scripted(
  name: string,
  script: (res: http.ServerResponse, body: Record<string, unknown>) => void | Promise<void>,
): string {
  t.backend.scripts.set(name, script);
  t.gateway.router.registerPolicy(name, { backend: 'toy', model: name });
  return name;
}

function sendJson(res: http.ServerResponse, text: string, headers: Record<string, string> = {}) {
  res.writeHead(200, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

/** A raw POST as a harness's HTTP library would send it, for bytes the openai client cannot write. */
async function post(url: string, key: string, text: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: text,
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

const chatReply = (extra = '') =>
  `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"logprobs":{"content":[{"token":"h","logprob":-0.5},{"token":"i","logprob":-0.0}]},"finish_reason":"stop","token_ids":[104,105]${extra}}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4},"prompt_token_ids":[1,2]}`;

describe('gateway transparency: bytes', () => {
  it("decodes characters split across the backend's reads whole, for the harness and the journal (1)", async () => {
    let proceed!: () => void;
    const proceeding = new Promise<void>((resolve) => (proceed = resolve));
    const model = scripted('script:split', async (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const event = (content: string, ids: number[]) =>
        `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, logprobs: { content: ids.map(() => ({ token: 'x', logprob: -1 })) }, finish_reason: null, token_ids: ids }] })}\n\n`;
      const bytes = Buffer.from(event('a', [97]) + event(' 🌍', [32, 127757]));
      // The first event and half of the globe's four bytes; the rest only once the harness has the first event.
      const cut = bytes.indexOf(Buffer.from('🌍')) + 2;
      res.write(bytes.subarray(0, cut));
      await proceeding;
      res.write(bytes.subarray(cut));
      res.end('data: [DONE]\n\n');
    });
    const { id, client } = await t.rollout();
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'x' }],
      stream: true,
    });
    const parts: string[] = [];
    for await (const chunk of stream) {
      parts.push(chunk.choices[0]?.delta.content ?? '');
      proceed();
    }
    expect(parts.join('')).toBe('a 🌍');
    const [call] = await t.store.listCalls(id);
    expect(call).toMatchObject({ status: 'ok', response: { choices: [{ message: { content: 'a 🌍' } }] } });
    expect(call?.choices?.[0]?.completionIds).toEqual([97, 32, 127757]);
  });

  it("sends the harness's bytes with only its own additions, and returns the backend's bytes with only those removed (2)", async () => {
    const model = scripted('script:bytes', (res) => sendJson(res, chatReply(',"extra":0.0')));
    const { key, baseUrl } = await t.rollout();
    const sent = `{"model": "${model}", "seed": 9007199254740993, "temperature": 1.0, "top_p": -0.0, "messages": [{"role": "user", "content": "caf\\u00e9"}]}`;
    const answer = await post(`${baseUrl}/chat/completions`, key, sent);
    expect(answer.status).toBe(200);
    expect(t.backend.requests.at(-1)?.text).toBe(`${sent.slice(0, -1)},"return_token_ids":true,"logprobs":true}`);
    expect(answer.text).toBe(
      '{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"logprobs":null,"finish_reason":"stop","extra":0.0}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}',
    );
  });

  it('adds no key the backend did not send, and relays a reply it did not change byte for byte', async () => {
    const bare =
      '{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop","token_ids":[1]}],"prompt_token_ids":[1]}';
    const model = scripted('script:bare', (res) => sendJson(res, bare));
    const { key, baseUrl } = await t.rollout();
    const answer = await post(`${baseUrl}/chat/completions`, key, JSON.stringify({ model, messages: [] }));
    expect(answer.text).toBe(
      '{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}',
    );
    const asked = await post(
      `${baseUrl}/chat/completions`,
      key,
      JSON.stringify({ model, messages: [], return_token_ids: true, logprobs: true }),
    );
    expect(asked.text).toBe(bare);
  });

  it('keeps a key named __proto__ as the plain key it is, as the backend does (6)', async () => {
    const { key, baseUrl } = await t.rollout();
    const answer = await post(
      `${baseUrl}/chat/completions`,
      key,
      '{"model":"production","messages":[{"role":"user","content":"x"}],"__proto__":{"polluted":true}}',
    );
    expect(answer.status).toBe(200);
    expect(t.backend.requests.at(-1)?.text).toContain('"__proto__":{"polluted":true}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe("gateway transparency: parameters are the backend's to judge (3)", () => {
  it.each([
    ['chat/completions', { logprobs: 1 }],
    ['chat/completions', { logprobs: 'yes' }],
    ['chat/completions', { return_token_ids: 'yes' }],
    ['chat/completions', { stream: true, stream_options: { include_usage: 'yes' } }],
    ['chat/completions', { top_logprobs: 2 }],
    ['completions', { logprobs: 'yes' }],
  ])("%s with %j: the backend's 400, as without the gateway", async (path, params) => {
    const { key, baseUrl } = await t.rollout();
    const body = {
      model: 'production',
      ...(path === 'completions' ? { prompt: 'x' } : { messages: [{ role: 'user', content: 'x' }] }),
      ...params,
    };
    const viaGateway = await post(`${baseUrl}/${path}`, key, JSON.stringify(body));
    const direct = await post(`${t.backend.url}/${path}`, 'unused', JSON.stringify({ ...body, model: MODEL }));
    expect(direct.status).toBe(400);
    expect(viaGateway).toMatchObject({ status: 400, text: direct.text });
  });

  it('relays usage a backend sends unasked (vLLM --enable-force-include-usage)', async () => {
    const model = scripted('script:usage', (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":"stop","token_ids":[1,2]}],"prompt_token_ids":[5]}\n\n`,
      );
      res.write(
        'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\n\n',
      );
      res.end('data: [DONE]\n\n');
    });
    const { id, client } = await t.rollout();
    const chunks = [];
    for await (const chunk of await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'x' }],
      stream: true,
    }))
      chunks.push(chunk);
    expect(chunks.at(-1)?.usage).toEqual({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
    expect((await t.store.listCalls(id))[0]).toMatchObject({ status: 'ok', usage: { total_tokens: 3 } });
  });
});

describe('gateway transparency: headers (4)', () => {
  it("forwards the harness's headers, not its key or the hop's, and relays the backend's", async () => {
    const model = scripted('script:headers', (res) =>
      sendJson(res, chatReply(), {
        'content-type': 'application/json; charset=utf-8',
        server: 'uvicorn',
        'x-backend': 'b1',
      }),
    );
    const { client } = await t.rollout();
    const headers = {
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      'x-request-id': 'req-42',
    };
    const { response } = await client.chat.completions
      .create({ model, messages: [{ role: 'user', content: 'x' }] }, { headers })
      .withResponse();
    const seen = t.backend.requests.at(-1)?.headers ?? {};
    expect(seen).toMatchObject({
      ...headers,
      'user-agent': expect.stringMatching(/OpenAI\/JS/),
      'x-stainless-lang': 'js',
    });
    expect(seen).not.toHaveProperty('authorization');
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(response.headers.get('server')).toBe('uvicorn');
    expect(response.headers.get('x-backend')).toBe('b1');
    expect(Number(response.headers.get('content-length'))).toBeGreaterThan(0);
    expect(response.headers.get('x-rein-call-id')).toMatch(/^call-/);
  });
});

describe('gateway transparency: models (5)', () => {
  it("answers an unknown model in the backend's shape and words, then the names it serves", async () => {
    const { key, baseUrl } = await t.rollout();
    const viaGateway = await post(`${baseUrl}/chat/completions`, key, JSON.stringify({ model: 'gpt-9', messages: [] }));
    const direct = await post(
      `${t.backend.url}/chat/completions`,
      'unused',
      JSON.stringify({ model: 'gpt-9', messages: [] }),
    );
    expect(viaGateway.status).toBe(404);
    const { error } = JSON.parse(viaGateway.text) as { error: { message: string } };
    const backend = (JSON.parse(direct.text) as { error: { message: string } }).error;
    expect(error.message.startsWith(`${backend.message} Names served here: production, `)).toBe(true);
    expect({ ...error, message: backend.message }).toEqual(backend);
  });

  it("serves a request without a model as vLLM does: with the rollout's pinned version, else production", async () => {
    const { key, baseUrl } = await t.rollout();
    const answer = await post(`${baseUrl}/chat/completions`, key, '{"messages":[{"role":"user","content":"x"}]}');
    expect(answer.status).toBe(200);
    expect(t.backend.requests.at(-1)?.text).toBe(
      `{"messages":[{"role":"user","content":"x"}],"model":"${MODEL}","return_token_ids":true,"logprobs":true}`,
    );
  });

  it("lists each model with its backend's card (context length, root, permissions)", async () => {
    const { client } = await t.rollout();
    const models = (await client.models.list()).data as unknown as Array<Record<string, unknown>>;
    expect(models.find((m) => m.id === 'production')).toMatchObject({
      object: 'model',
      root: MODEL,
      max_model_len: 4096,
      permission: [expect.any(Object)],
      policy_version: 'policy-v1',
    });
  });
});

describe("gateway transparency: a backend's malformed answer is its fault, journaled as such (9)", () => {
  const deep = `{"choices":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
  it.each([
    ['holes in choices', chatReply().replace('"choices":[', '"choices":[null, 7, ').replace('"index":0', '"index":2')],
    ['a null log-prob entry', chatReply().replace('"logprobs":{"content":[', '"logprobs":{"content":[null,')],
    [
      'token ids that are not ids',
      chatReply().replace('"token_ids":[104,105]', '"token_ids":["a", null, 4294967297, 7.9]'),
    ],
    ['a log-prob out of range', chatReply().replace('"logprob":-0.5', '"logprob":1e40')],
    ['a log-prob that is a string', chatReply().replace('"logprob":-0.5', '"logprob":"nan"')],
    ['nesting 100,000 deep', deep],
  ])('%s → 502 upstream_bad_response, the call finished', async (label, body) => {
    const model = scripted(`script:bad:${label.replace(/[^a-z0-9]+/g, '-')}`, (res) => sendJson(res, body));
    const { id, client } = await t.rollout();
    const error = await client.chat.completions
      .create({ model, messages: [{ role: 'user', content: 'x' }] })
      .catch((err: unknown) => err);
    expect(error).toMatchObject({ status: 502, code: 'upstream_bad_response' });
    expect(String((error as Error).message)).not.toMatch(/127\.0\.0\.1|Error:/);
    const [call] = await t.store.listCalls(id);
    expect(call).toMatchObject({
      status: 'error',
      errorClass: 'upstream_bad_response',
      errorMessage: expect.any(String),
    });
  });

  it('journals a shadow whose candidate answers malformed JSON as upstream_bad_response', async () => {
    const model = scripted('script:bad-candidate', (res) =>
      sendJson(res, chatReply().replace('"choices":[', '"choices":[null,')),
    );
    await t.admin('PUT', '/api/mirrors/production', { candidate: model });
    try {
      const { id, client } = await t.rollout();
      await client.chat.completions.create({ model: 'production', messages: [{ role: 'user', content: 'x' }] });
      for (;;) {
        const { body } = await t.admin('GET', `/api/shadow-calls?rolloutId=${id}`);
        if (body.items.length > 0) {
          expect(body.items[0]).toMatchObject({ status: 'error', errorClass: 'upstream_bad_response' });
          break;
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      await t.admin('DELETE', '/api/mirrors/production');
    }
  });

  it('relays a stream chunk it cannot read as it came, streams on, and journals the call as upstream_bad_response', async () => {
    const model = scripted('script:bad-chunk', (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null,"token_ids":[97]}]}\n\n',
      );
      res.write('data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":"notarray"}\n\n');
      res.write(
        'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop","token_ids":[98]}]}\n\n',
      );
      res.end('data: [DONE]\n\n');
    });
    const { id, key, baseUrl } = await t.rollout();
    const answer = await post(
      `${baseUrl}/chat/completions`,
      key,
      JSON.stringify({ model, messages: [], stream: true }),
    );
    expect(answer.text).toContain('"choices":"notarray"');
    expect(answer.text).toContain('"content":"b"');
    expect(answer.text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect((await t.store.listCalls(id))[0]).toMatchObject({ status: 'error', errorClass: 'upstream_bad_response' });
  });

  it('answers a body the backend cut off 502 without its address', async () => {
    const { client } = await t.rollout();
    const error = await client.chat.completions
      .create({ model: 'fault:cut', messages: [{ role: 'user', content: 'x' }] })
      .catch((err: unknown) => err);
    expect(error).toMatchObject({ status: 502 });
    expect(String((error as Error).message)).not.toContain(t.backend.url.replace(/\/v1$/, ''));
    expect(String((error as Error).message)).not.toContain('127.0.0.1');
  });
});

describe('gateway transparency: hostile requests (6, 10, 17, 18)', () => {
  const deep = (levels: number) =>
    `{"model":"production","messages":[],"x":${'['.repeat(levels)}${']'.repeat(levels)}}`;

  it('refuses JSON nested 5,000 deep with a 400 on model calls, rollout creation and events', async () => {
    const { id, key, baseUrl } = await t.rollout();
    for (const [url, credential] of [
      [`${baseUrl}/chat/completions`, key],
      [`${t.gateway.url}/api/rollouts`, 'admin-key-for-tests'],
      [`${t.gateway.url}/api/rollouts/${id}/events`, key],
    ] as const) {
      const answer = await post(url, credential, deep(5000));
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.text)).toMatchObject({
        error: { code: 'json_too_deep', message: expect.stringContaining('deeper than') },
      });
    }
  });

  it("answers a malformed URL and a too long one in Rein's error shape", async () => {
    for (const [path, status] of [
      ['/rollouts/%E0%A4%A/attempts/1/v1/models', 400],
      [`/rollouts/${'r'.repeat(5000)}/attempts/1/v1/models`, 414],
    ] as const) {
      const res = await fetch(`${t.gateway.url}${path}`);
      expect(res.status).toBe(status);
      expect(await res.json()).toEqual({
        error: { code: expect.any(String), message: expect.any(String), type: 'invalid_request_error', param: null },
      });
    }
  });

  it('logs a failure of its own with the call id, ends the call in the journal, and answers without internals (18)', async () => {
    const { id, client } = await t.rollout();
    const finishCall = t.store.finishCall.bind(t.store);
    let failed = false;
    t.store.finishCall = async (...args) => {
      if (!failed) {
        failed = true;
        throw new Error('SQLITE_IOERR: disk I/O error at /var/secret/traces.sqlite');
      }
      return finishCall(...args);
    };
    try {
      const error = await client.chat.completions
        .create({ model: 'production', messages: [{ role: 'user', content: 'x' }] })
        .catch((err: unknown) => err);
      expect(error).toMatchObject({ status: 500, code: 'gateway_error' });
      expect(String((error as Error).message)).not.toMatch(/SQLITE|secret/);
    } finally {
      t.store.finishCall = finishCall;
    }
    const [call] = await t.store.listCalls(id);
    expect(call).toMatchObject({ status: 'error', errorClass: 'gateway_error' });
    expect(logged.find((line) => line.callId === call?.id)).toMatchObject({
      level: 50,
      err: { message: expect.stringContaining('SQLITE_IOERR') },
    });
  });

  it('answers 408 to a request body that does not arrive in time, and frees the connection', async () => {
    const slow = await startTestGateway({ gateway: { requestTimeoutMs: 300 } });
    try {
      const { port } = new URL(slow.gateway.url);
      const socket = net.connect(Number(port), '127.0.0.1');
      let answer = '';
      socket.on('data', (d: Buffer) => (answer += d.toString()));
      socket.write(
        'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{',
      );
      await new Promise((resolve) => socket.on('close', resolve));
      expect(answer).toMatch(/^HTTP\/1\.1 408/);
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({
        error: { code: 'request_timeout' },
      });
      // Only receiving the request is timed: an answer may take as long as the backend needs.
      const { client } = await slow.rollout();
      await expect(
        client.chat.completions.create({ model: 'fault:slow:2500', messages: [{ role: 'user', content: 'x' }] }),
      ).resolves.toMatchObject({ object: 'chat.completion' });
    } finally {
      await slow.close();
    }
  });
});
