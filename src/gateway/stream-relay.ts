import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { CallErrorClass } from '../store/trace-store.js';
import { classify, parseJson, relayedHeaders, type Finish } from './backend-reply.js';
import type { HarnessReply } from './harness-reply.js';
import { extractTokens, responseProblem, usageFromTokens } from './openai-shapes.js';
import type { ProxiedCall } from './proxied-call.js';
import { SseParser } from './sse.js';
import { StreamAssembler } from './stream-assembler.js';

/**
 * Relays a backend's event stream to the harness event by event as it arrives, as `reply` words
 * it (less what the gateway injected, or translated), and journals the response assembled from it
 * before the stream's end goes out.
 */
export async function relayStream(
  call: ProxiedCall,
  upstream: { statusCode: number; headers: IncomingHttpHeaders; body: AsyncIterable<Buffer> },
  res: ServerResponse,
  reply: HarnessReply,
  finish: Finish,
  t0: number,
): Promise<void> {
  res.writeHead(upstream.statusCode, relayedHeaders(upstream.headers));
  res.flushHeaders();
  const parser = new SseParser();
  const assembler = new StreamAssembler(reply.upstream);
  // One decoder for the whole stream: a character split across two reads is decoded whole.
  const decoder = new TextDecoder();
  let done: string | undefined;
  let ttftMs: number | null = null;
  let failure: { errorClass: CallErrorClass; message: string } | undefined;
  let badChunk: string | undefined;
  try {
    for await (const piece of upstream.body) {
      // The events that arrived together go out together: one write (one syscall), not one each.
      let out = '';
      for (const event of parser.push(decoder.decode(piece, { stream: true }))) {
        if (event.data === '[DONE]') {
          // Held back until the call is journaled: the harness's stream ends only after that.
          done = event.raw;
          continue;
        }
        if (event.data === null) {
          out += event.raw;
          continue;
        }
        const chunk = parseJson(event.data);
        const problem = chunk
          ? responseProblem(reply.upstream, chunk, true)
          : 'an event whose data is not a JSON object';
        if (!chunk || problem) {
          // Relayed as it came (the harness would have had it without the gateway); the call is not one to learn from.
          badChunk ??= problem ?? undefined;
          out += event.raw;
          continue;
        }
        try {
          assembler.add(chunk);
        } catch (err) {
          badChunk ??= `a chunk the gateway cannot assemble (${(err as Error).message})`;
        }
        out += reply.event(event, chunk);
      }
      if (out !== '') {
        ttftMs ??= performance.now() - t0;
        res.write(out);
      }
    }
    const tail = decoder.decode();
    if (tail !== '') parser.push(tail);
    if (done === undefined && reply.needsDone) {
      failure = { errorClass: 'upstream_stream_cut', message: 'the backend ended the stream without [DONE]' };
    }
  } catch (err) {
    failure = classify(err, call.signal, true);
  }
  if (!failure && badChunk !== undefined) {
    failure = {
      errorClass: 'upstream_bad_response',
      message: `the backend's stream holds a chunk the gateway cannot read: ${badChunk}`,
    };
  }
  await finishAssembled(reply, assembler, finish, {
    upstreamStatus: upstream.statusCode,
    ttftMs,
    failure,
  });
  if (failure && (failure.errorClass !== 'upstream_bad_response' || reply.cutOnBadChunk)) {
    // The harness sees a broken stream, as it would have from the backend directly.
    res.destroy();
    return;
  }
  res.end(reply.end(done, parser.rest()));
}

/** Journals the stream's response as assembled from its chunks, as the harness was told it. */
async function finishAssembled(
  reply: HarnessReply,
  assembler: StreamAssembler,
  finish: Finish,
  outcome: {
    upstreamStatus: number;
    ttftMs: number | null;
    failure: { errorClass: CallErrorClass; message: string } | undefined;
  },
): Promise<void> {
  const assembled = assembler.response();
  const tokens = extractTokens(reply.upstream, assembled);
  await finish({
    upstreamStatus: outcome.upstreamStatus,
    response: reply.streamed(assembled),
    ...tokens,
    usage: tokens.usage ?? usageFromTokens(tokens.promptIds, tokens.choices),
    ttftMs: outcome.ttftMs,
    errorClass: outcome.failure?.errorClass ?? null,
    errorMessage: outcome.failure?.message ?? null,
  });
}
