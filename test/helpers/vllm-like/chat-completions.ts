import type http from 'node:http';
import { cutAfterFlush, halfThenReset, json, sleep, type Streaming } from './replies.js';
import { chatReply, logprobOf, renderChat, tokenize, type Json, type Message } from './toy-model.js';

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
  if (body.stream !== true) {
    if (cut) return halfThenReset(res);
    return json(res, 200, {
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
        logprobs: wantLogprobs
          ? { content: tokenize(r.text).map((id) => ({ token: String.fromCharCode(id), logprob: logprobOf(id) })) }
          : null,
        finish_reason: r.finishReason,
        stop_reason: r.stopReason ?? null,
        ...(wantIds && { token_ids: tokenize(r.text) }),
      })),
      usage,
      ...(wantIds && { prompt_token_ids: promptIds }),
    });
  }
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
      const delta = r.toolCall
        ? {
            tool_calls: [
              {
                index: 0,
                function: {
                  arguments: r.toolCall.arguments.slice(
                    (at / r.text.length) * r.toolCall.arguments.length,
                    ((at + chunkSize) / r.text.length) * r.toolCall.arguments.length,
                  ),
                },
              },
            ],
          }
        : { content: piece };
      send({
        choices: [
          {
            index,
            delta,
            logprobs: wantLogprobs
              ? { content: ids.map((id) => ({ token: String.fromCharCode(id), logprob: logprobOf(id) })) }
              : null,
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
