import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small OpenAI-compatible server with vLLM's response shapes (token ids, log-probs, usage,
 * SSE streaming with prompt ids on the first chunk and per-chunk completion ids), driven by a
 * deterministic toy "model" so tests know what to expect. Models named `fault:*` misbehave on
 * purpose: `fault:500`, `fault:garbage`, `fault:reset`, `fault:cut` (stream or body broken off
 * midway), `fault:slow:<ms>` (headers delayed) and `fault:hold` (no headers until the test calls
 * `release()`: a call that stays in flight exactly as long as a test needs, then is answered as
 * the toy model would).
 *
 * Tokenizer: one token per UTF-16 code unit, id = char code. Chat template:
 * `<|role|>content<|end|>` per message, tool calls as `<tool_call>{json}</tool_call>`, then
 * `<|assistant|>`.
 */
export interface VllmLikeServer {
  url: string;
  /** Every model call as it arrived: its body parsed and as bytes (text), and its headers. */
  requests: Array<{ path: string; body: Record<string, unknown>; text: string; headers: http.IncomingHttpHeaders }>;
  /**
   * Models answered by a test's own script instead of the toy model, for replies the toy model
   * never gives (raw bytes, split characters, malformed JSON, extra headers). Register the model
   * with the gateway too.
   */
  scripts: Map<string, (res: http.ServerResponse, body: Record<string, unknown>) => void | Promise<void>>;
  /** How many `fault:hold` requests are waiting for `release()`. */
  held(): number;
  /** Lets every held request go on; each is answered as the toy model would answer it. */
  release(): void;
  /** LoRA adapters loaded through vLLM's /v1/load_lora_adapter; each answers as the toy model. Clear it to play a restarted server. */
  adapters: Set<string>;
  close(): Promise<void>;
}

type Json = Record<string, unknown>;
interface Message {
  role: string;
  content?: string | null;
  tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
}

export const MODEL = 'toy-model';

export function tokenize(text: string): number[] {
  return Array.from({ length: text.length }, (_, i) => text.charCodeAt(i));
}

export function renderChat(messages: Message[]): string {
  const parts = messages.map((m) => {
    const calls = (m.tool_calls ?? []).map((c) => `<tool_call>${JSON.stringify({ name: c.function.name, arguments: JSON.parse(c.function.arguments) })}</tool_call>`);
    return `<|${m.role}|>${m.content ?? ''}${calls.join('')}<|end|>`;
  });
  return `${parts.join('')}<|assistant|>`;
}

export function logprobOf(id: number): number {
  return -0.01 * (1 + (id % 7));
}

interface Completion {
  text: string;
  toolCall?: { name: string; arguments: string };
  finishReason: string;
  stopReason?: string;
}

function chatReply(body: Json, index: number): Completion {
  const messages = body.messages as Message[];
  const last = messages[messages.length - 1];
  const tools = body.tools as Array<{ function: { name: string; parameters?: { properties?: Record<string, unknown> } } }> | undefined;
  if (tools?.length && last?.role === 'user') {
    // The user's message becomes the tool's first parameter (or `expression`).
    const param = Object.keys(tools[0]!.function.parameters?.properties ?? {})[0] ?? 'expression';
    const args = JSON.stringify({ [param]: last.content ?? '' });
    return { text: `<tool_call>${JSON.stringify({ name: tools[0]!.function.name, arguments: JSON.parse(args) })}</tool_call>`, toolCall: { name: tools[0]!.function.name, arguments: args }, finishReason: 'tool_calls' };
  }
  const base = last?.role === 'tool' ? `The answer is ${last.content}.` : `Echo: ${last?.content ?? ''}`;
  return limit(index ? `${base} #${index}` : base, body);
}

function limit(text: string, body: Json): Completion {
  for (const stop of ([] as string[]).concat((body.stop as string | string[] | undefined) ?? [])) {
    const at = text.indexOf(stop);
    if (at >= 0) return { text: text.slice(0, at), finishReason: 'stop', stopReason: stop };
  }
  const max = (body.max_tokens ?? body.max_completion_tokens) as number | undefined;
  if (max !== undefined && text.length > max) return { text: text.slice(0, max), finishReason: 'length' };
  return { text, finishReason: 'stop' };
}

export async function startVllmLikeServer(options: { chunkSize?: number; chunkDelayMs?: number } = {}): Promise<VllmLikeServer> {
  const chunkSize = options.chunkSize ?? 4;
  const requests: VllmLikeServer['requests'] = [];
  const holding: Array<() => void> = [];
  const adapters = new Set<string>();
  const scripts: VllmLikeServer['scripts'] = new Map();
  const server = http.createServer((req, res) => {
    const pieces: Buffer[] = [];
    req.on('data', (d: Buffer) => pieces.push(d));
    req.on('end', () => {
      // Like vLLM, a request it cannot serve gets a 400, never a hang.
      handle(req.url ?? '', Buffer.concat(pieces).toString(), res, req.headers).catch((err: Error) => {
        if (!res.headersSent) json(res, 400, { error: { message: err.message, type: 'BadRequestError', param: null, code: 400 } });
      });
    });
  });

  async function handle(path: string, text: string, res: http.ServerResponse, headers: http.IncomingHttpHeaders) {
    if (path === '/v1/models') {
      // vLLM's model cards: what a harness may read (the context length above all) lies beyond the id.
      const card = (id: string) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'vllm', root: MODEL, parent: id === MODEL ? null : MODEL, max_model_len: 4096, permission: [{ id: `modelperm-${id}`, object: 'model_permission', allow_sampling: true }] });
      return json(res, 200, { object: 'list', data: [MODEL, ...adapters].map(card) });
    }
    let body: Json;
    try {
      body = JSON.parse(text) as Json;
    } catch {
      return json(res, 400, { error: { message: 'invalid JSON', type: 'BadRequestError', param: null, code: 400 } });
    }
    if (path === '/v1/load_lora_adapter') {
      adapters.add(String(body.lora_name));
      res.writeHead(200, { 'content-type': 'text/plain' });
      return res.end(`Success: LoRA adapter '${String(body.lora_name)}' added successfully.`);
    }
    requests.push({ path, body, text, headers });
    const invalid = wrongType(path, body);
    if (invalid) return json(res, 400, { error: { message: invalid, type: 'BadRequestError', param: null, code: 400 } });
    const model = String(body.model);
    const script = scripts.get(model);
    if (script) return script(res, body);
    if (model === 'fault:500') return json(res, 500, { error: { message: 'engine crashed', type: 'InternalServerError', param: null, code: 500 } });
    if (model === 'fault:garbage') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end('<html>not json</html>');
    }
    if (model === 'fault:reset') return res.socket?.destroy();
    if (model.startsWith('fault:slow:')) await sleep(Number(model.split(':')[2]));
    else if (model === 'fault:hold') await new Promise<void>((resolve) => holding.push(resolve));
    else if (model !== MODEL && model !== 'fault:cut' && !adapters.has(model)) {
      return json(res, 404, { error: { message: `The model \`${model}\` does not exist.`, type: 'NotFoundError', param: null, code: 404 } });
    }
    if (path === '/v1/chat/completions') return chat(body, res, model === 'fault:cut');
    if (path === '/v1/completions') return completions(body, res, model === 'fault:cut');
    if (path === '/v1/responses') {
      return json(res, 200, {
        id: 'resp-1',
        object: 'response',
        status: 'completed',
        model: body.model,
        output: [{ type: 'message', id: 'msg-1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'ok', annotations: [] }] }],
        usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
      });
    }
    return json(res, 404, { error: { message: `no route ${path}`, type: 'NotFoundError', param: null, code: 404 } });
  }

  async function chat(body: Json, res: http.ServerResponse, cut: boolean) {
    const promptIds = tokenize(renderChat(body.messages as Message[]));
    const n = (body.n as number | undefined) ?? 1;
    const replies = Array.from({ length: n }, (_, i) => chatReply(body, i));
    const wantIds = body.return_token_ids === true;
    const wantLogprobs = body.logprobs === true;
    const usage = { prompt_tokens: promptIds.length, completion_tokens: replies.reduce((s, r) => s + r.text.length, 0), total_tokens: 0 };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    const head = { id: 'chatcmpl-toy', created: 1_700_000_000, model: body.model };
    if (body.stream !== true) {
      if (cut) return halfThenReset(res);
      return json(res, 200, {
        ...head,
        object: 'chat.completion',
        choices: replies.map((r, index) => ({
          index,
          message: r.toolCall
            ? { role: 'assistant', content: null, tool_calls: [{ id: `call_${index}`, type: 'function', function: r.toolCall }] }
            : { role: 'assistant', content: r.text },
          logprobs: wantLogprobs ? { content: tokenize(r.text).map((id) => ({ token: String.fromCharCode(id), logprob: logprobOf(id) })) } : null,
          finish_reason: r.finishReason,
          stop_reason: r.stopReason ?? null,
          ...(wantIds && { token_ids: tokenize(r.text) }),
        })),
        usage,
        ...(wantIds && { prompt_token_ids: promptIds }),
      });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const send = (chunk: Json) => res.write(`data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', ...chunk })}\n\n`);
    send({ choices: replies.map((_, index) => ({ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null })), ...(wantIds && { prompt_token_ids: promptIds }) });
    for (const [index, r] of replies.entries()) {
      if (r.toolCall) send({ choices: [{ index, delta: { tool_calls: [{ index: 0, id: `call_${index}`, type: 'function', function: { name: r.toolCall.name, arguments: '' } }] }, finish_reason: null }] });
      for (let at = 0; at < r.text.length; at += chunkSize) {
        if (cut && at >= r.text.length / 2) return cutAfterFlush(res);
        const piece = r.text.slice(at, at + chunkSize);
        const ids = tokenize(piece);
        const delta = r.toolCall
          ? { tool_calls: [{ index: 0, function: { arguments: r.toolCall.arguments.slice((at / r.text.length) * r.toolCall.arguments.length, ((at + chunkSize) / r.text.length) * r.toolCall.arguments.length) } }] }
          : { content: piece };
        send({
          choices: [{ index, delta, logprobs: wantLogprobs ? { content: ids.map((id) => ({ token: String.fromCharCode(id), logprob: logprobOf(id) })) } : null, finish_reason: null, ...(wantIds && { token_ids: ids }) }],
        });
        if (options.chunkDelayMs) await sleep(options.chunkDelayMs);
      }
      send({ choices: [{ index, delta: {}, logprobs: null, finish_reason: r.finishReason, stop_reason: r.stopReason ?? null, ...(wantIds && { token_ids: [] }) }] });
    }
    if ((body.stream_options as Json | undefined)?.include_usage) send({ choices: [], usage });
    res.end('data: [DONE]\n\n');
  }

  async function completions(body: Json, res: http.ServerResponse, cut: boolean) {
    const prompt = String(body.prompt);
    const promptIds = tokenize(prompt);
    const n = (body.n as number | undefined) ?? 1;
    const replies = Array.from({ length: n }, (_, i) => limit(` -> ${prompt.slice(-10).toUpperCase()}${i ? ` #${i}` : ''}`, body));
    const wantIds = body.return_token_ids === true;
    const wantLogprobs = typeof body.logprobs === 'number';
    const usage = { prompt_tokens: promptIds.length, completion_tokens: replies.reduce((s, r) => s + r.text.length, 0), total_tokens: 0 };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    const head = { id: 'cmpl-toy', created: 1_700_000_000, model: body.model };
    const logprobsOf = (text: string) => (wantLogprobs ? { tokens: [...text], token_logprobs: tokenize(text).map(logprobOf), top_logprobs: null, text_offset: [] } : null);
    if (body.stream !== true) {
      if (cut) return halfThenReset(res);
      return json(res, 200, {
        ...head,
        object: 'text_completion',
        choices: replies.map((r, index) => ({
          index,
          text: r.text,
          logprobs: logprobsOf(r.text),
          finish_reason: r.finishReason,
          stop_reason: r.stopReason ?? null,
          ...(wantIds && { prompt_token_ids: promptIds, token_ids: tokenize(r.text) }),
        })),
        usage,
      });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const send = (chunk: Json) => res.write(`data: ${JSON.stringify({ ...head, object: 'text_completion', ...chunk })}\n\n`);
    for (const [index, r] of replies.entries()) {
      for (let at = 0; at < r.text.length; at += chunkSize) {
        if (cut && at >= r.text.length / 2) return cutAfterFlush(res);
        const piece = r.text.slice(at, at + chunkSize);
        send({ choices: [{ index, text: piece, logprobs: logprobsOf(piece), finish_reason: null, ...(wantIds && { token_ids: tokenize(piece), ...(at === 0 && { prompt_token_ids: promptIds }) }) }] });
        if (options.chunkDelayMs) await sleep(options.chunkDelayMs);
      }
      send({ choices: [{ index, text: '', logprobs: null, finish_reason: r.finishReason, stop_reason: r.stopReason ?? null }] });
    }
    if ((body.stream_options as Json | undefined)?.include_usage) send({ choices: [], usage });
    res.end('data: [DONE]\n\n');
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    scripts,
    held: () => holding.length,
    release: () => holding.splice(0).forEach((resolve) => resolve()),
    adapters,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What vLLM's request validation refuses (with a 400) among the parameters the gateway might add. */
function wrongType(path: string, body: Json): string | undefined {
  const present = (key: string) => body[key] !== undefined && body[key] !== null;
  if (present('return_token_ids') && typeof body.return_token_ids !== 'boolean') return 'return_token_ids: Input should be a valid boolean';
  const options = body.stream_options as Json | null | undefined;
  if (options && options.include_usage !== undefined && options.include_usage !== null && typeof options.include_usage !== 'boolean') {
    return 'stream_options.include_usage: Input should be a valid boolean';
  }
  if (path === '/v1/chat/completions') {
    if (present('logprobs') && typeof body.logprobs !== 'boolean') return 'logprobs: Input should be a valid boolean';
    if (present('top_logprobs') && body.logprobs !== true) return 'when using `top_logprobs`, `logprobs` must be set to true.';
  }
  if (path === '/v1/completions' && present('logprobs') && !Number.isInteger(body.logprobs)) return 'logprobs: Input should be a valid integer';
  return undefined;
}

function json(res: http.ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Lets what was written reach the peer, then breaks the connection as a crashed server would. */
async function cutAfterFlush(res: http.ServerResponse) {
  await sleep(20);
  res.socket?.destroy();
}

function halfThenReset(res: http.ServerResponse) {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
  res.write('{"id": "chatcmpl-toy", "choi');
  setTimeout(() => res.socket?.destroy(), 10);
}

function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms));
}
