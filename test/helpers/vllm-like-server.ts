import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chatCompletions } from './vllm-like/chat-completions.js';
import { completions } from './vllm-like/completions.js';
import { breakCall, faultDelay } from './vllm-like/faults.js';
import { listModels, loadLoraAdapter } from './vllm-like/lora-adapters.js';
import { errorReply, json, type Streaming } from './vllm-like/replies.js';
import { wrongType } from './vllm-like/request-validation.js';
import { MODEL, type Json } from './vllm-like/toy-model.js';

export { logprobOf, MODEL, renderChat, tokenize } from './vllm-like/toy-model.js';

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
 *
 * The pieces, in vllm-like/: toy-model.ts (tokenizer, chat template, log-probs, replies),
 * chat-completions.ts and completions.ts (the two routes), lora-adapters.ts (/v1/models and
 * /v1/load_lora_adapter), faults.ts (the `fault:*` models), request-validation.ts (vLLM's 400s).
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
  /**
   * LoRA adapters loaded through vLLM's /v1/load_lora_adapter; each answers as the toy model. Clear it to play a
   * restarted server.
   */
  adapters: Map<string, string>;
  close(): Promise<void>;
}

/** What one server keeps between requests. */
interface ServerState {
  requests: VllmLikeServer['requests'];
  scripts: VllmLikeServer['scripts'];
  adapters: Map<string, string>;
  /** The `fault:hold` calls waiting for `release()`. */
  holding: Array<() => void>;
  streaming: Streaming;
}

export async function startVllmLikeServer(
  options: { chunkSize?: number; chunkDelayMs?: number } = {},
): Promise<VllmLikeServer> {
  const state: ServerState = {
    requests: [],
    scripts: new Map(),
    adapters: new Map<string, string>(),
    holding: [],
    streaming: { chunkSize: options.chunkSize ?? 4, chunkDelayMs: options.chunkDelayMs },
  };
  const server = http.createServer((req, res) => {
    const pieces: Buffer[] = [];
    req.on('data', (d: Buffer) => pieces.push(d));
    req.on('end', () => {
      // Like vLLM, a request it cannot serve gets a 400, never a hang.
      handle(state, req.url ?? '', Buffer.concat(pieces).toString(), res, req.headers).catch((err: Error) => {
        if (!res.headersSent) errorReply(res, 400, 'BadRequestError', err.message);
      });
    });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests: state.requests,
    scripts: state.scripts,
    held: () => state.holding.length,
    release: () => state.holding.splice(0).forEach((resolve) => resolve()),
    adapters: state.adapters,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function handle(
  state: ServerState,
  path: string,
  text: string,
  res: http.ServerResponse,
  headers: http.IncomingHttpHeaders,
) {
  if (path === '/v1/models') return listModels(res, state.adapters);
  let body: Json;
  try {
    body = JSON.parse(text) as Json;
  } catch {
    return errorReply(res, 400, 'BadRequestError', 'invalid JSON');
  }
  if (path === '/v1/load_lora_adapter') return loadLoraAdapter(res, state.adapters, body);
  state.requests.push({ path, body, text, headers });
  const invalid = wrongType(path, body);
  if (invalid) return errorReply(res, 400, 'BadRequestError', invalid);
  const model = String(body.model);
  const script = state.scripts.get(model);
  if (script) return script(res, body);
  if (breakCall(model, res)) return;
  const delay = faultDelay(model, state.holding);
  if (delay) await delay;
  else if (model !== MODEL && model !== 'fault:cut' && !state.adapters.has(model)) {
    return errorReply(res, 404, 'NotFoundError', `The model \`${model}\` does not exist.`);
  }
  if (path === '/v1/chat/completions') return chatCompletions(body, res, model === 'fault:cut', state.streaming);
  if (path === '/v1/completions') return completions(body, res, model === 'fault:cut', state.streaming);
  if (path === '/v1/responses') {
    return json(res, 200, {
      id: 'resp-1',
      object: 'response',
      status: 'completed',
      model: body.model,
      output: [
        {
          type: 'message',
          id: 'msg-1',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'ok', annotations: [] }],
        },
      ],
      usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
    });
  }
  return errorReply(res, 404, 'NotFoundError', `no route ${path}`);
}
