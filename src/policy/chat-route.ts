import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { parseToolCalls } from './chat-format.js';
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
import type { ChatChunk, ChatChunkBody, ChatLogprobs, ChatReply } from './openai-replies.js';
import { chatLogprobs, usageOf } from './openai-replies.js';
import { startStream, streamed } from './policy-http.js';
import { chatRequest, parseRequest, type ChatRequest } from './request-fields.js';
import type { GenerationState } from './scheduler.js';
import type { ServedModels } from './served-models.js';
import { replyToolCalls, rowMask, toolShaping, type ToolShaping } from './tool-choice.js';

/** One chat request being answered: what every piece of its answer is built from. */
export interface ChatCall {
  body: ChatRequest;
  checkpoint: Checkpoint;
  prompt: number[];
  head: { id: string; created: number; model: string };
  tools: ToolShaping;
}

export type ChatRouteOptions = Generator & { models: ServedModels };

/** POST /v1/chat/completions: the model's chat template, tool calls in its compact syntax, streaming or not. */
export async function chatRoute(app: FastifyInstance, options: ChatRouteOptions): Promise<void> {
  app.post('/v1/chat/completions', async (req, reply) => {
    const call = prepareChat(options, req.body);
    if (!call.body.stream) return answerChat(options, call);
    let res: ServerResponse | undefined;
    // Rows of a failed stream may still be going: nothing goes out after its end.
    const write = chatChunks(options, call, (chunk) => {
      if (res && !res.writableEnded) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
    });
    // Bad requests were refused above, before the stream began; tokens arrive from the next tick.
    res = startStream(reply);
    await streamed(res, write);
  });
}

/**
 * A chat request checked and made ready to answer: its prompt rendered with the served model's
 * template. Refuses (HttpError) what the server cannot honor. The Responses and Messages routes
 * answer through here too, with the chat request their translation made.
 */
export function prepareChat(options: ChatRouteOptions, raw: unknown): ChatCall {
  const body = parseRequest(chatRequest, raw);
  const tools = toolShaping(body);
  const checkpoint = options.models.get(body.model);
  const prompt =
    body.prompt_token_ids ??
    checkpoint.tokenizer.promptIds({
      messages: body.messages,
      ...(body.tools && { tools: body.tools }),
      ...(body.chat_template_kwargs && { chat_template_kwargs: body.chat_template_kwargs }),
    });
  const head = { id: `chatcmpl-${randomUUID()}`, created: Math.floor(Date.now() / 1000), model: body.model };
  return { body, checkpoint, prompt, head, tools };
}

/** A finished row's message, tool calls parsed out where the request offered tools, each with its own id. */
function messageOf(call: ChatCall, state: GenerationState) {
  const text = replyText(call.checkpoint, state);
  const found = call.tools.parse ? parseToolCalls(text) : { content: text, toolCalls: [] };
  const parsed = { ...found, toolCalls: replyToolCalls(found.toolCalls, call.tools) };
  return {
    parsed,
    finish: parsed.toolCalls.length > 0 ? ('tool_calls' as const) : (state.finishReason as 'stop' | 'length'),
  };
}

/** The log-probs of a row's tokens from `from` on (a stream sends each token once). */
function logprobsOf(call: ChatCall, state: GenerationState, from = 0): ChatLogprobs {
  if (!call.body.logprobs) return null;
  const { ids, logprobs, top } = state;
  const row = { ids: ids.slice(from), logprobs: logprobs.slice(from), top: top.slice(from) };
  return { content: chatLogprobs(call.checkpoint.tokenizer, row) };
}

/** How the call's rows are drawn: its tool mask or each row's constraint, and as many top log-probs as it asked for. */
function shapingOf(call: ChatCall) {
  return {
    ...(call.tools.mask && { mask: call.tools.mask }),
    ...(call.tools.grammar && { rowMask: () => rowMask(call.tools, call.checkpoint) }),
    topLogprobs: call.body.logprobs ? (call.body.top_logprobs ?? 0) : 0,
  };
}

/** The whole answer to a prepared chat request. */
export async function answerChat(generator: Generator, call: ChatCall): Promise<ChatReply> {
  const { body, prompt } = call;
  const states = await Promise.all(generateRows(generator, call.checkpoint, prompt, body, undefined, shapingOf(call)));
  const completionTokens = states.reduce((n, s) => n + s.ids.length, 0);
  return {
    ...call.head,
    object: 'chat.completion',
    choices: states.map((state, index) => {
      const { parsed, finish } = messageOf(call, state);
      return {
        index,
        message: {
          role: 'assistant',
          content: parsed.content,
          ...(parsed.toolCalls.length > 0 && { tool_calls: parsed.toolCalls }),
        },
        logprobs: logprobsOf(call, state),
        finish_reason: finish,
        stop_reason: state.stopReason,
        ...(body.return_token_ids && { token_ids: state.ids }),
      };
    }),
    usage: usageOf(prompt.length, completionTokens),
    ...(body.return_token_ids && { prompt_token_ids: prompt }),
  };
}

/**
 * Token by token; a row's text goes out once no stop string can still claim it, its tool calls with
 * its end. Generation starts now; the returned writer sends the first chunk and waits for the rows'
 * ends, so call it once the stream has begun. `sendChunk` gets each whole chunk.
 */
export function chatChunks(
  generator: Generator,
  call: ChatCall,
  sendChunk: (chunk: ChatChunk) => void,
): () => Promise<void> {
  const { body, prompt, checkpoint } = call;
  const send = (chunk: ChatChunkBody) => sendChunk({ ...call.head, object: 'chat.completion.chunk', ...chunk });
  const n = body.n ?? 1;
  const emitted = nothingEmitted(n);
  const holdBack = stopHoldBack(body.stop);
  const rows = generateRows(
    generator,
    checkpoint,
    prompt,
    body,
    (choice, state) => {
      if (state.finishReason) return; // the last piece goes out with the finish reason
      const mark = emitted[choice] as Emitted;
      let text = replyText(checkpoint, state);
      if (call.tools.parse && text.includes('<tool_call>')) text = text.slice(0, text.indexOf('<tool_call>'));
      const safe = text.slice(0, Math.max(mark.chars, settledLength(text, holdBack)));
      const ids = state.ids.slice(mark.tokens);
      send({
        choices: [
          {
            index: choice,
            delta: { content: safe.slice(mark.chars) },
            logprobs: logprobsOf(call, state, mark.tokens),
            finish_reason: null,
            ...(body.return_token_ids && { token_ids: ids }),
          },
        ],
      });
      mark.chars = safe.length;
      mark.tokens = state.ids.length;
    },
    shapingOf(call),
  );
  return async () => {
    send({
      choices: Array.from({ length: n }, (_, index) => ({
        index,
        delta: { role: 'assistant', content: '' },
        logprobs: null,
        finish_reason: null,
      })),
      ...(body.return_token_ids && { prompt_token_ids: prompt }),
    });
    let completionTokens = 0;
    await Promise.all(
      rows.map(async (row, choice) => {
        const state = await row;
        completionTokens += state.ids.length;
        send(lastChunk(call, state, choice, emitted[choice] as Emitted));
      }),
    );
    if (body.stream_options?.include_usage) send({ choices: [], usage: usageOf(prompt.length, completionTokens) });
  };
}

/** A row's last chunk: the rest of its text, its tool calls, and its finish reason. */
function lastChunk(call: ChatCall, state: GenerationState, choice: number, mark: Emitted): ChatChunkBody {
  const { parsed, finish } = messageOf(call, state);
  const ids = state.ids.slice(mark.tokens);
  const rest = (parsed.content ?? '').slice(mark.chars);
  return {
    choices: [
      {
        index: choice,
        delta: {
          ...(rest && { content: rest }),
          ...(parsed.toolCalls.length > 0 && {
            tool_calls: parsed.toolCalls.map((toolCall, index) => ({ index, ...toolCall })),
          }),
        },
        logprobs: logprobsOf(call, state, mark.tokens),
        finish_reason: finish,
        stop_reason: state.stopReason,
        ...(call.body.return_token_ids && { token_ids: ids }),
      },
    ],
  };
}
