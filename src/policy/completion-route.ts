import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Checkpoint } from './checkpoint.js';
import {
  generateRows,
  nothingEmitted,
  replyText,
  settledLength,
  stopHoldBack,
  type Emitted,
  type Generator,
} from './generation.js';
import {
  completionTopLogprobs,
  usageOf,
  type CompletionLogprobs,
  type CompletionReply,
  type CompletionReplyChoice,
  type Usage,
} from './openai-replies.js';
import { HttpError, startStream, streamed } from './policy-http.js';
import { completionRequest, parseRequest, type CompletionRequest } from './request-fields.js';
import type { GenerationState } from './scheduler.js';
import type { ServedModels } from './served-models.js';

/** One completions request being answered. */
interface CompletionCall {
  body: CompletionRequest;
  checkpoint: Checkpoint;
  prompt: number[];
  head: Pick<CompletionReply, 'id' | 'created' | 'model' | 'object'>;
}

export type CompletionRouteOptions = Generator & { models: ServedModels };

/** POST /v1/completions: a text prompt or token ids, streaming or not. */
export async function completionRoute(app: FastifyInstance, options: CompletionRouteOptions): Promise<void> {
  app.post('/v1/completions', async (req, reply) => {
    const body = parseRequest(completionRequest, req.body);
    const checkpoint = options.models.get(body.model);
    const prompt = typeof body.prompt === 'string' ? checkpoint.tokenizer.encode(body.prompt) : body.prompt;
    if (prompt.length === 0) throw new HttpError(400, 'BadRequestError', 'prompt: must not be empty');
    const head = {
      id: `cmpl-${randomUUID()}`,
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      object: 'text_completion' as const,
    };
    const call: CompletionCall = { body, checkpoint, prompt, head };
    if (body.stream) return streamCompletion(options, call, reply);
    return completionReply(options, call);
  });
}

/** The log-probs of a row's tokens from `from` on (a stream sends each token once), with `logprobs` top ones. */
function logprobsOf(call: CompletionCall, state: GenerationState, from = 0): CompletionLogprobs {
  const { tokenizer } = call.checkpoint;
  const k = call.body.logprobs;
  if (typeof k !== 'number') return null;
  const row = { ids: state.ids.slice(from), logprobs: state.logprobs.slice(from), top: state.top.slice(from) };
  return {
    tokens: row.ids.map((id) => tokenizer.decode([id])),
    token_logprobs: row.logprobs,
    top_logprobs: completionTopLogprobs(tokenizer, row, k),
    text_offset: [],
  };
}

/** As many top log-probs per token as the request asked for. */
function shapingOf(call: CompletionCall) {
  return { topLogprobs: call.body.logprobs ?? 0 };
}

function usageOfRows(call: CompletionCall, done: GenerationState[]): Usage {
  return usageOf(
    call.prompt.length,
    done.reduce((n, st) => n + st.ids.length, 0),
  );
}

async function completionReply(generator: Generator, call: CompletionCall): Promise<CompletionReply> {
  const { body, prompt, checkpoint } = call;
  const done = await Promise.all(generateRows(generator, checkpoint, prompt, body, undefined, shapingOf(call)));
  const choices = done.map((state, index) => ({
    index,
    text: replyText(checkpoint, state),
    logprobs: logprobsOf(call, state),
    finish_reason: state.finishReason,
    stop_reason: state.stopReason,
    ...(body.return_token_ids && { prompt_token_ids: prompt, token_ids: state.ids }),
  }));
  return { ...call.head, choices, usage: usageOfRows(call, done) };
}

/** Token by token, as vLLM streams completions: the prompt ids ride on each choice's first chunk. */
async function streamCompletion(generator: Generator, call: CompletionCall, reply: FastifyReply): Promise<void> {
  const { body, prompt, checkpoint } = call;
  let res: ServerResponse | undefined;
  const send = (choice: CompletionReplyChoice) =>
    !res?.writableEnded &&
    res?.write(`data: ${JSON.stringify({ ...call.head, choices: [choice] } satisfies CompletionReply)}\n\n`);
  const emitted = nothingEmitted(body.n ?? 1);
  const holdBack = stopHoldBack(body.stop);
  const piece = (index: number, state: GenerationState, final: boolean): CompletionReplyChoice => {
    const mark = emitted[index] as Emitted;
    const text = replyText(checkpoint, state);
    const safe = final ? text : text.slice(0, Math.max(mark.chars, settledLength(text, holdBack)));
    const ids = state.ids.slice(mark.tokens);
    const chunk = {
      index,
      text: safe.slice(mark.chars),
      logprobs: logprobsOf(call, state, mark.tokens),
      finish_reason: final ? state.finishReason : null,
      ...(final && { stop_reason: state.stopReason }),
      ...(body.return_token_ids && { token_ids: ids, ...(mark.tokens === 0 && { prompt_token_ids: prompt }) }),
    };
    mark.chars = safe.length;
    mark.tokens = state.ids.length;
    return chunk;
  };
  const rows = generateRows(
    generator,
    checkpoint,
    prompt,
    body,
    (index, state) => {
      if (!state.finishReason) send(piece(index, state, false));
    },
    shapingOf(call),
  );
  // Bad requests were refused above, before the stream began; tokens arrive from the next tick.
  const stream = startStream(reply);
  res = stream;
  await streamed(stream, async () => {
    const done = await Promise.all(
      rows.map(async (row, index) => {
        const state = await row;
        send(piece(index, state, true));
        return state;
      }),
    );
    if (body.stream_options?.include_usage)
      stream.write(
        `data: ${JSON.stringify({ ...call.head, choices: [], usage: usageOfRows(call, done) } satisfies CompletionReply)}\n\n`,
      );
  });
}
