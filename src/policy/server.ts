import { randomUUID } from 'node:crypto';
import { clientErrorAnswer } from '../http/client-error.js';
import type { ServerResponse } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { z, ZodError } from 'zod';
import { matchesHash, sha256Hex } from '../gateway/keys.js';
import { PolicyServerMetrics } from '../metrics/policy-server-metrics.js';
import { exposition } from '../metrics/registry.js';
import { END_OF_TURN, parseToolCalls, specialTokenId } from './chat-format.js';
import type { ArtifactStore } from '../artifacts/artifact-store.js';
import { isLocalReference, localPath, stageFolder } from '../artifacts/folders.js';
import { loadCheckpoint, type Checkpoint } from './checkpoint.js';
import { readyBackend } from './model.js';
import { GenerationScheduler, type GenerationState } from './scheduler.js';

/**
 * The embedded policy server: the parts of vLLM's OpenAI-compatible server that Rein and
 * harnesses use — chat and completions, streaming or not, `n`, temperature, top_p, max_tokens,
 * stop, seed, `return_token_ids`, log-probs, tool calls in the model's compact syntax — and
 * several policy versions served by name, loaded and unloaded at runtime.
 */
export interface PolicyServer {
  app: FastifyInstance;
  url: string;
  models(): string[];
  load(name: string, dir: string): void;
  /** Loads a checkpoint by path or URI: one in the artifact store (s3://) is staged to a local folder first. */
  loadFrom(name: string, ref: string): Promise<void>;
  unload(name: string): void;
  close(): Promise<void>;
}

const sampling = {
  model: z.string().min(1),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).max(10).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  n: z.number().int().min(1).max(32).nullish(),
  seed: z.number().int().nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(16)]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).passthrough().nullish(),
  return_token_ids: z.boolean().nullish(),
};
const chatRequest = z
  .object({
    ...sampling,
    messages: z.array(z.object({ role: z.string() }).passthrough()).min(1),
    tools: z.array(z.unknown()).nullish(),
    logprobs: z.boolean().nullish(),
    chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  })
  .passthrough();
const completionRequest = z
  .object({ ...sampling, prompt: z.union([z.string(), z.array(z.number().int().min(0))]), logprobs: z.number().int().min(0).max(20).nullish() })
  .passthrough();

const BODY_LIMIT_BYTES = 16 * 1024 * 1024;

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

export interface PolicyServerOptions {
  host: string;
  port: number;
  models?: Record<string, string>;
  maxBatchRows?: number;
  /**
   * The key loading and unloading versions needs (`Authorization: Bearer <key>`); without one,
   * those endpoints refuse: anyone on the host could otherwise unload what production serves.
   */
  adminKey?: string | undefined;
  /**
   * Where s3:// checkpoints and adapters are read from (the config's artifact store), and the
   * local folder they are staged into: the model code reads files. Without it, only paths load.
   */
  artifacts?: { store: ArtifactStore; stagingDir: string } | undefined;
}

/** The error body of every answer that is not a success: vLLM's shape, which holds Rein's {code, message}. */
function errorBody(status: number, type: string, message: string) {
  return { error: { message, type, param: null, code: status } };
}

export async function startPolicyServer(options: PolicyServerOptions): Promise<PolicyServer> {
  await readyBackend();
  const models = new Map<string, Checkpoint>();
  const load = (name: string, dir: string) => {
    if (models.has(name)) throw new HttpError(400, 'BadRequestError', `model ${name} is already loaded; unload it first`);
    models.set(name, loadCheckpoint(dir));
  };
  const localFolder = async (ref: string): Promise<string> => {
    if (isLocalReference(ref)) return localPath(ref);
    if (!options.artifacts) throw new HttpError(400, 'BadRequestError', `${ref} is not a local folder, and this policy server has no artifact store to read it from: set artifacts.url (and artifacts.s3) in its config`);
    return stageFolder(options.artifacts.store, ref, options.artifacts.stagingDir);
  };
  const loadFrom = async (name: string, ref: string) => {
    if (models.has(name)) throw new HttpError(400, 'BadRequestError', `model ${name} is already loaded; unload it first`);
    load(name, await localFolder(ref));
  };
  for (const [name, ref] of Object.entries(options.models ?? {})) await loadFrom(name, ref);
  const scheduler = new GenerationScheduler(options.maxBatchRows);
  const metrics = new PolicyServerMetrics();
  const app = Fastify({
    logger: false,
    bodyLimit: BODY_LIMIT_BYTES,
    // Errors the router meets before any route (a URL that does not decode) answer in the same shape.
    frameworkErrors: (err, _req, reply) => {
      const status = err.statusCode ?? 400;
      void (reply as FastifyReply).code(status).send(errorBody(status, 'BadRequestError', err.message));
    },
    // So do requests Node's HTTP parser refuses (a URL or headers over its limit: 431, bad framing: 400).
    clientErrorHandler: clientErrorAnswer({ body: (status, _code, message) => errorBody(status, 'BadRequestError', message) }),
  });

  app.setErrorHandler((err, _req, reply) => {
    const status = (err as { statusCode?: number }).statusCode;
    const { code, type, message } =
      err instanceof HttpError
        ? { code: err.status, type: err.type, message: err.message }
        : err instanceof ZodError
          ? { code: 400, type: 'BadRequestError', message: err.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ') }
          : status === 413
            ? { code: 413, type: 'BadRequestError', message: `the request body is over the limit of ${BODY_LIMIT_BYTES} bytes; send a shorter prompt` }
            : status !== undefined && status >= 400 && status < 500
              ? { code: status, type: 'BadRequestError', message: (err as Error).message }
              : { code: 500, type: 'InternalServerError', message: (err as Error).message };
    void reply.code(code).send(errorBody(code, type, message));
  });
  // Streams are answered on the raw response (hijacked), which Fastify's onResponse hook never sees.
  app.addHook('onRequest', async (req, reply) => {
    reply.raw.once('finish', () => metrics.answered(req.routeOptions.url ?? '', reply.raw.statusCode));
  });
  app.setNotFoundHandler((req, reply) => void reply.code(404).send(errorBody(404, 'NotFoundError', `no route ${req.method} ${req.url.split('?')[0] ?? ''}`)));

  const adminKeyHash = options.adminKey ? sha256Hex(options.adminKey) : undefined;
  const requireAdmin = (authorization: string | undefined) => {
    if (!adminKeyHash) {
      throw new HttpError(403, 'PermissionDeniedError', 'loading and unloading versions is off on this server: start it with an admin key (REIN_POLICY_SERVER_KEY, or `rein policy serve --admin-key-env NAME`)');
    }
    const given = /^Bearer (.+)$/.exec(authorization ?? '')?.[1] ?? '';
    if (!matchesHash(given, adminKeyHash)) throw new HttpError(401, 'AuthenticationError', 'loading and unloading versions needs the admin key: send Authorization: Bearer <key>');
  };

  /** New requests no longer find the version; those generating with it finish first, then its weights go. */
  const unload = (name: string) => {
    const checkpoint = modelOf(name);
    models.delete(name);
    void scheduler.idle(checkpoint).then(() => checkpoint.model.dispose());
  };
  const modelOf = (name: string) => {
    const checkpoint = models.get(name);
    if (!checkpoint) throw new HttpError(404, 'NotFoundError', `The model \`${name}\` does not exist.`);
    return checkpoint;
  };

  /** Generates n rows for one prompt, checking the context limit as vLLM does. */
  const run = (checkpoint: Checkpoint, prompt: number[], body: z.infer<typeof chatRequest> | z.infer<typeof completionRequest>, onToken?: (choice: number, state: GenerationState) => void) => {
    const { vocabSize } = checkpoint.config;
    const outside = prompt.find((id) => id >= vocabSize);
    if (outside !== undefined) throw new HttpError(400, 'BadRequestError', `prompt: token id ${outside} is outside the vocabulary of ${body.model} (ids 0 to ${vocabSize - 1})`);
    const context = checkpoint.config.maxPositions;
    const requested = body.max_tokens ?? body.max_completion_tokens ?? undefined;
    const maxTokens = requested ?? context - prompt.length;
    if (prompt.length + maxTokens > context || maxTokens < 1) {
      throw new HttpError(
        400,
        'BadRequestError',
        `This model's maximum context length is ${context} tokens. However, you requested ${prompt.length + Math.max(maxTokens, 1)} tokens (${prompt.length} in the prompt, ${Math.max(maxTokens, 1)} for the completion). Please reduce the prompt or max_tokens.`,
      );
    }
    const seed = body.seed ?? Math.floor(Math.random() * 2 ** 31);
    return Array.from({ length: body.n ?? 1 }, (_, choice) =>
      metrics.row(prompt.length, scheduler.generate({
        checkpoint,
        prompt,
        maxTokens,
        temperature: body.temperature ?? 1,
        topP: body.top_p ?? 1,
        seed: seed + choice,
        stopIds: [specialTokenId(END_OF_TURN), specialTokenId('<|endoftext|>')],
        stopStrings: body.stop === undefined || body.stop === null ? [] : ([] as string[]).concat(body.stop),
        ...(onToken && { onToken: (state) => onToken(choice, state) }),
      })),
    );
  };

  /** The reply text of a row: without the end-of-turn token, cut at a stop string. */
  const textOf = (checkpoint: Checkpoint, state: GenerationState) => {
    const ids = typeof state.stopReason === 'number' ? state.ids.slice(0, -1) : state.ids;
    const text = checkpoint.tokenizer.decode(ids);
    return typeof state.stopReason === 'string' ? text.slice(0, text.indexOf(state.stopReason)) : text;
  };

  app.post('/v1/chat/completions', async (req, reply) => {
    const body = chatRequest.parse(req.body);
    const checkpoint = modelOf(body.model);
    const prompt = checkpoint.tokenizer.promptIds({
      messages: body.messages,
      ...(body.tools && { tools: body.tools }),
      ...(body.chat_template_kwargs && { chat_template_kwargs: body.chat_template_kwargs }),
    });
    const head = { id: `chatcmpl-${randomUUID()}`, created: Math.floor(Date.now() / 1000), model: body.model };
    const withTools = (body.tools?.length ?? 0) > 0;
    const message = (state: GenerationState) => {
      const text = textOf(checkpoint, state);
      const parsed = withTools ? parseToolCalls(text) : { content: text, toolCalls: [] };
      return { parsed, finish: parsed.toolCalls.length > 0 ? 'tool_calls' : (state.finishReason as string) };
    };
    const logprobsOf = (ids: number[], logprobs: number[]) =>
      body.logprobs ? { content: ids.map((id, i) => ({ token: checkpoint.tokenizer.decode([id]), logprob: logprobs[i] as number, bytes: null, top_logprobs: [] })) } : null;

    if (body.stream) {
      let res: ServerResponse | undefined;
      // Rows of a failed stream may still be going: nothing goes out after its end.
      const send = (chunk: object) => !res?.writableEnded && res?.write(`data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', ...chunk })}\n\n`);
      const n = body.n ?? 1;
      const emitted = Array.from({ length: n }, () => ({ chars: 0, tokens: 0 }));
      const holdBack = Math.max(0, ...([] as string[]).concat(body.stop ?? []).map((s) => s.length - 1));
      const rows = run(checkpoint, prompt, body, (choice, state) => {
        if (state.finishReason) return; // the last piece goes out with the finish reason
        const mark = emitted[choice] as { chars: number; tokens: number };
        let text = textOf(checkpoint, state);
        if (withTools && text.includes('<tool_call>')) text = text.slice(0, text.indexOf('<tool_call>'));
        const safe = text.slice(0, Math.max(mark.chars, settledLength(text, holdBack)));
        const ids = state.ids.slice(mark.tokens);
        send({
          choices: [
            {
              index: choice,
              delta: { content: safe.slice(mark.chars) },
              logprobs: logprobsOf(ids, state.logprobs.slice(mark.tokens)),
              finish_reason: null,
              ...(body.return_token_ids && { token_ids: ids }),
            },
          ],
        });
        mark.chars = safe.length;
        mark.tokens = state.ids.length;
      });
      // Bad requests were refused above, before the stream began; tokens arrive from the next tick.
      res = startStream(reply);
      await streamed(res, async () => {
        send({
          choices: Array.from({ length: n }, (_, index) => ({ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null })),
          ...(body.return_token_ids && { prompt_token_ids: prompt }),
        });
        let completionTokens = 0;
        await Promise.all(
          rows.map(async (row, choice) => {
            const state = await row;
            completionTokens += state.ids.length;
            const mark = emitted[choice] as { chars: number; tokens: number };
            const { parsed, finish } = message(state);
            const ids = state.ids.slice(mark.tokens);
            const rest = (parsed.content ?? '').slice(mark.chars);
            send({
              choices: [
                {
                  index: choice,
                  delta: {
                    ...(rest && { content: rest }),
                    ...(parsed.toolCalls.length > 0 && { tool_calls: parsed.toolCalls.map((call, index) => ({ index, ...call })) }),
                  },
                  logprobs: logprobsOf(ids, state.logprobs.slice(mark.tokens)),
                  finish_reason: finish,
                  stop_reason: state.stopReason,
                  ...(body.return_token_ids && { token_ids: ids }),
                },
              ],
            });
          }),
        );
        if (body.stream_options?.include_usage) {
          send({ choices: [], usage: { prompt_tokens: prompt.length, completion_tokens: completionTokens, total_tokens: prompt.length + completionTokens } });
        }
      });
      return;
    }

    const states = await Promise.all(run(checkpoint, prompt, body));
    const completionTokens = states.reduce((n, s) => n + s.ids.length, 0);
    return {
      ...head,
      object: 'chat.completion',
      choices: states.map((state, index) => {
        const { parsed, finish } = message(state);
        return {
          index,
          message: { role: 'assistant', content: parsed.content, ...(parsed.toolCalls.length > 0 && { tool_calls: parsed.toolCalls }) },
          logprobs: logprobsOf(state.ids, state.logprobs),
          finish_reason: finish,
          stop_reason: state.stopReason,
          ...(body.return_token_ids && { token_ids: state.ids }),
        };
      }),
      usage: { prompt_tokens: prompt.length, completion_tokens: completionTokens, total_tokens: prompt.length + completionTokens },
      ...(body.return_token_ids && { prompt_token_ids: prompt }),
    };
  });

  app.post('/v1/completions', async (req, reply) => {
    const body = completionRequest.parse(req.body);
    const checkpoint = modelOf(body.model);
    const prompt = typeof body.prompt === 'string' ? checkpoint.tokenizer.encode(body.prompt) : body.prompt;
    if (prompt.length === 0) throw new HttpError(400, 'BadRequestError', 'prompt: must not be empty');
    const head = { id: `cmpl-${randomUUID()}`, created: Math.floor(Date.now() / 1000), model: body.model, object: 'text_completion' };
    const logprobsOf = (ids: number[], logprobs: number[]) =>
      typeof body.logprobs === 'number' ? { tokens: ids.map((id) => checkpoint.tokenizer.decode([id])), token_logprobs: logprobs, top_logprobs: null, text_offset: [] } : null;
    const usageOf = (done: GenerationState[]) => {
      const completionTokens = done.reduce((n, st) => n + st.ids.length, 0);
      return { prompt_tokens: prompt.length, completion_tokens: completionTokens, total_tokens: prompt.length + completionTokens };
    };
    if (!body.stream) {
      const done = await Promise.all(run(checkpoint, prompt, body));
      const choices = done.map((state, index) => ({
        index,
        text: textOf(checkpoint, state),
        logprobs: logprobsOf(state.ids, state.logprobs),
        finish_reason: state.finishReason,
        stop_reason: state.stopReason,
        ...(body.return_token_ids && { prompt_token_ids: prompt, token_ids: state.ids }),
      }));
      return { ...head, choices, usage: usageOf(done) };
    }

    // Token by token, as vLLM streams completions: the prompt ids ride on each choice's first chunk.
    let res: ServerResponse | undefined;
    const send = (choice: object) => !res?.writableEnded && res?.write(`data: ${JSON.stringify({ ...head, choices: [choice] })}\n\n`);
    const emitted = Array.from({ length: body.n ?? 1 }, () => ({ chars: 0, tokens: 0 }));
    const holdBack = Math.max(0, ...([] as string[]).concat(body.stop ?? []).map((st) => st.length - 1));
    const piece = (index: number, state: GenerationState, final: boolean) => {
      const mark = emitted[index] as { chars: number; tokens: number };
      const text = textOf(checkpoint, state);
      const safe = final ? text : text.slice(0, Math.max(mark.chars, settledLength(text, holdBack)));
      const ids = state.ids.slice(mark.tokens);
      const chunk = {
        index,
        text: safe.slice(mark.chars),
        logprobs: logprobsOf(ids, state.logprobs.slice(mark.tokens)),
        finish_reason: final ? state.finishReason : null,
        ...(final && { stop_reason: state.stopReason }),
        ...(body.return_token_ids && { token_ids: ids, ...(mark.tokens === 0 && { prompt_token_ids: prompt }) }),
      };
      mark.chars = safe.length;
      mark.tokens = state.ids.length;
      return chunk;
    };
    const rows = run(checkpoint, prompt, body, (index, state) => {
      if (!state.finishReason) send(piece(index, state, false));
    });
    // Bad requests were refused above, before the stream began; tokens arrive from the next tick.
    const stream = startStream(reply);
    res = stream;
    await streamed(stream, async () => {
      const done = await Promise.all(rows.map(async (row, index) => {
        const state = await row;
        send(piece(index, state, true));
        return state;
      }));
      if (body.stream_options?.include_usage) stream.write(`data: ${JSON.stringify({ ...head, choices: [], usage: usageOf(done) })}\n\n`);
    });
  });

  app.get('/v1/models', async () => ({
    object: 'list',
    data: [...models.entries()].map(([id, c]) => ({ id, object: 'model', created: 0, owned_by: 'rein', root: id, parent: null, max_model_len: c.config.maxPositions })),
  }));

  const loadBody = z.object({ lora_name: z.string().min(1), lora_path: z.string().min(1) });
  app.post('/v1/load_lora_adapter', async (req) => {
    requireAdmin(req.headers.authorization);
    const { lora_name, lora_path } = loadBody.parse(req.body);
    try {
      await loadFrom(lora_name, lora_path);
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw new HttpError(400, 'BadRequestError', (err as Error).message);
    }
    return `Success: model ${lora_name} loaded from ${lora_path}`;
  });
  app.post('/v1/unload_lora_adapter', async (req) => {
    requireAdmin(req.headers.authorization);
    const { lora_name } = z.object({ lora_name: z.string().min(1) }).parse(req.body);
    unload(lora_name);
    return `Success: model ${lora_name} unloaded`;
  });
  app.get('/health', async () => ({ ok: true }));
  // Open like vLLM's /metrics: the server listens where only Rein and its harnesses reach it.
  app.get('/metrics', async (_req, reply) => {
    const { contentType, text } = await exposition(metrics.registry);
    return reply.type(contentType).send(text);
  });

  const url = await app.listen({ host: options.host, port: options.port });
  return {
    app,
    url: `${url}/v1`,
    models: () => [...models.keys()],
    load,
    loadFrom,
    unload,
    async close() {
      await app.close();
      for (const c of models.values()) c.model.dispose();
      models.clear();
    },
  };
}

/**
 * How much of a growing reply can go out: not the last characters a stop string may still
 * claim, nor a trailing U+FFFD that is only the first bytes of a character (byte-level tokens).
 */
function settledLength(text: string, holdBack: number): number {
  let end = text.length - holdBack;
  while (end > 0 && text[end - 1] === '\ufffd') end--;
  return end;
}

/**
 * Writes a stream's events, then its end. A failure once the stream has begun (its 200 is sent)
 * ends it with an error event, as vLLM does, so no client waits for an end that never comes.
 */
async function streamed(res: ServerResponse, write: () => Promise<void>): Promise<void> {
  try {
    await write();
  } catch (err) {
    res.write(`data: ${JSON.stringify(errorBody(500, 'InternalServerError', `generation failed: ${(err as Error).message}`))}\n\n`);
  }
  res.end('data: [DONE]\n\n');
}

function startStream(reply: FastifyReply): ServerResponse {
  void reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  return res;
}
