import type http from 'node:http';
import { cutAfterFlush, halfThenReset, json, sleep, type Streaming } from './replies.js';
import { chatReply, logprobOf, renderChat, tokenize, type Completion, type Json, type Message } from './toy-model.js';

/** What a chat completion is made of, streamed or not: the replies and what the request asked to see. */
interface ChatAnswer {
  body: Json;
  /** The fields every chat.completion object and chunk starts with. */
  head: Json;
  replies: Completion[];
  promptIds: number[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  wantIds: boolean;
  wantLogprobs: boolean;
}

/**
 * POST /v1/chat/completions in vLLM's shapes: `n` choices, tool calls, log-probs per token
 * (`logprobs: true`), token ids with `return_token_ids` (prompt ids on the response, or on the
 * first chunk when streamed; each chunk's completion ids on its choice), usage. `cut` breaks the
 * body or stream off midway.
 */
export async function chatCompletions(body: Json, res: http.ServerResponse, cut: boolean, streaming: Streaming) {
  const promptIds = tokenize(renderChat(body.messages as Message[]));
  const n = (body.n as number | undefined) ?? 1;
  const replies = Array.from({ length: n }, (_, i) => chatReply(body, i));
  const wantIds = body.return_token_ids === true;
  const wantLogprobs = body.logprobs === true;
  const usage = {
    prompt_tokens: promptIds.length,
    completion_tokens: replies.reduce((s, r) => s + r.text.length, 0),
    total_tokens: 0,
  };
  usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
  const head = { id: 'chatcmpl-toy', created: 1_700_000_000, model: body.model };
  const answer: ChatAnswer = { body, head, replies, promptIds, usage, wantIds, wantLogprobs };
  if (body.stream !== true) {
    if (cut) return halfThenReset(res);
    return json(res, 200, chatCompletion(answer));
  }
  return streamChatCompletion(answer, res, cut, streaming);
}

/** The whole `chat.completion` object. */
function chatCompletion({ head, replies, promptIds, usage, wantIds, wantLogprobs }: ChatAnswer): Json {
  return {
    ...head,
    object: 'chat.completion',
    choices: replies.map((r, index) => ({
      index,
      message: r.toolCall
        ? {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: `call_${index}`, type: 'function', function: r.toolCall }],
          }
        : { role: 'assistant', content: r.text },
      logprobs: wantLogprobs ? tokenLogprobs(tokenize(r.text)) : null,
      finish_reason: r.finishReason,
      stop_reason: r.stopReason ?? null,
      ...(wantIds && { token_ids: tokenize(r.text) }),
    })),
    usage,
    ...(wantIds && { prompt_token_ids: promptIds }),
  };
}

/**
 * The `chat.completion.chunk` stream: a first chunk opening every choice, then each choice in turn,
 * its text (or its tool call's arguments) `chunkSize` tokens a chunk, then its finish; usage when
 * asked (`stream_options.include_usage`); then [DONE].
 */
async function streamChatCompletion(answer: ChatAnswer, res: http.ServerResponse, cut: boolean, streaming: Streaming) {
  const { body, head, replies, promptIds, usage, wantIds, wantLogprobs } = answer;
  const { chunkSize, chunkDelayMs } = streaming;
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const send = (chunk: Json) =>
    res.write(`data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', ...chunk })}\n\n`);
  send({
    choices: replies.map((_, index) => ({
      index,
      delta: { role: 'assistant', content: '' },
      logprobs: null,
      finish_reason: null,
    })),
    ...(wantIds && { prompt_token_ids: promptIds }),
  });
  for (const [index, r] of replies.entries()) {
    if (r.toolCall)
      send({
        choices: [
          {
            index,
            delta: {
              tool_calls: [
                { index: 0, id: `call_${index}`, type: 'function', function: { name: r.toolCall.name, arguments: '' } },
              ],
            },
            finish_reason: null,
          },
        ],
      });
    for (let at = 0; at < r.text.length; at += chunkSize) {
      if (cut && at >= r.text.length / 2) return cutAfterFlush(res);
      const piece = r.text.slice(at, at + chunkSize);
      const ids = tokenize(piece);
      const delta = r.toolCall ? toolCallDelta(r.toolCall, r.text.length, at, chunkSize) : { content: piece };
      send({
        choices: [
          {
            index,
            delta,
            logprobs: wantLogprobs ? tokenLogprobs(ids) : null,
            finish_reason: null,
            ...(wantIds && { token_ids: ids }),
          },
        ],
      });
      if (chunkDelayMs) await sleep(chunkDelayMs);
    }
    send({
      choices: [
        {
          index,
          delta: {},
          logprobs: null,
          finish_reason: r.finishReason,
          stop_reason: r.stopReason ?? null,
          ...(wantIds && { token_ids: [] }),
        },
      ],
    });
  }
  if ((body.stream_options as Json | undefined)?.include_usage) send({ choices: [], usage });
  res.end('data: [DONE]\n\n');
}

/**
 * A tool call's arguments, streamed in step with its reply's text: the share of them that text[at, at + chunkSize)
 * stands for.
 */
function toolCallDelta(
  toolCall: NonNullable<Completion['toolCall']>,
  textLength: number,
  at: number,
  chunkSize: number,
) {
  return {
    tool_calls: [
      {
        index: 0,
        function: {
          arguments: toolCall.arguments.slice(
            (at / textLength) * toolCall.arguments.length,
            ((at + chunkSize) / textLength) * toolCall.arguments.length,
          ),
        },
      },
    ],
  };
}

/** vLLM's chat log-probs: each token with its log-prob. */
function tokenLogprobs(ids: number[]) {
  return { content: ids.map((id) => ({ token: String.fromCharCode(id), logprob: logprobOf(id) })) };
}
