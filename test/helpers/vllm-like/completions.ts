import type http from 'node:http';
import { cutAfterFlush, halfThenReset, json, sleep, type Streaming } from './replies.js';
import { completionReply, logprobOf, tokenize, type Json } from './toy-model.js';

/**
 * POST /v1/completions in vLLM's shapes: `n` choices, legacy log-probs (`logprobs: <int>`),
 * prompt and completion token ids with `return_token_ids` (streamed: the prompt's on each
 * choice's first chunk), usage. `cut` breaks the body or stream off midway.
 */
export async function completions(body: Json, res: http.ServerResponse, cut: boolean, streaming: Streaming) {
  const prompt = String(body.prompt);
  const promptIds = tokenize(prompt);
  const n = (body.n as number | undefined) ?? 1;
  const replies = Array.from({ length: n }, (_, i) => completionReply(body, i));
  const wantIds = body.return_token_ids === true;
  const wantLogprobs = typeof body.logprobs === 'number';
  const usage = {
    prompt_tokens: promptIds.length,
    completion_tokens: replies.reduce((s, r) => s + r.text.length, 0),
    total_tokens: 0,
  };
  usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
  const head = { id: 'cmpl-toy', created: 1_700_000_000, model: body.model };
  const logprobsOf = (text: string) =>
    wantLogprobs
      ? { tokens: [...text], token_logprobs: tokenize(text).map(logprobOf), top_logprobs: null, text_offset: [] }
      : null;
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
  const { chunkSize, chunkDelayMs } = streaming;
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const send = (chunk: Json) =>
    res.write(`data: ${JSON.stringify({ ...head, object: 'text_completion', ...chunk })}\n\n`);
  for (const [index, r] of replies.entries()) {
    for (let at = 0; at < r.text.length; at += chunkSize) {
      if (cut && at >= r.text.length / 2) return cutAfterFlush(res);
      const piece = r.text.slice(at, at + chunkSize);
      send({
        choices: [
          {
            index,
            text: piece,
            logprobs: logprobsOf(piece),
            finish_reason: null,
            ...(wantIds && { token_ids: tokenize(piece), ...(at === 0 && { prompt_token_ids: promptIds }) }),
          },
        ],
      });
      if (chunkDelayMs) await sleep(chunkDelayMs);
    }
    send({
      choices: [{ index, text: '', logprobs: null, finish_reason: r.finishReason, stop_reason: r.stopReason ?? null }],
    });
  }
  if ((body.stream_options as Json | undefined)?.include_usage) send({ choices: [], usage });
  res.end('data: [DONE]\n\n');
}
