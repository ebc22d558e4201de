import type { ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import {
  backendRefusal,
  badResponse,
  classify,
  parseJson,
  readReply,
  relayedHeaders,
  type Finish,
} from './backend-reply.js';
import type { HarnessReply } from './harness-reply.js';
import { extractTokens, usageFromTokens } from './openai-shapes.js';
import type { ProxiedCall } from './proxied-call.js';
import type { Route } from './routing.js';

/**
 * Relays a backend's whole (not streamed) answer to the harness as `reply` words it, and journals
 * it before it goes out; a backend's error answer goes out as the backend wrote it (translated
 * into the API's error shape where the call was).
 * `ttft`: when the backend's response headers came, in ms since the call started.
 */
export async function relayWhole(
  call: ProxiedCall,
  route: Route,
  upstream: Dispatcher.ResponseData,
  res: ServerResponse,
  reply: HarnessReply,
  finish: Finish,
  ttft: number,
): Promise<void> {
  let text: string;
  try {
    text = await upstream.body.text();
  } catch (err) {
    const failure = classify(err, call.signal, true);
    await finish({
      upstreamStatus: upstream.statusCode,
      errorClass: failure.errorClass,
      errorMessage: failure.message,
      ttftMs: ttft,
    });
    throw failure.httpError(route);
  }
  if (upstream.statusCode < 200 || upstream.statusCode >= 300) {
    // The harness sees the backend's own error, as it would without the gateway.
    await finish({
      upstreamStatus: upstream.statusCode,
      response: parseJson(text) ?? text,
      errorClass: 'upstream_http_error',
      errorMessage: backendRefusal(upstream.statusCode, text),
      ttftMs: ttft,
    });
    const body = reply.error(upstream.statusCode, text);
    res.writeHead(upstream.statusCode, relayedHeaders(upstream.headers, Buffer.byteLength(body)));
    res.end(body);
    return;
  }
  const { response, problem } = readReply(reply.upstream, text);
  if (!response) {
    await finish({
      upstreamStatus: upstream.statusCode,
      errorClass: 'upstream_bad_response',
      errorMessage: `the backend's response is not one the gateway can read: ${problem}`,
      ttftMs: ttft,
    });
    throw badResponse(route);
  }
  const tokens = extractTokens(reply.upstream, response);
  const { journal, text: out } = reply.whole(response, text);
  await finish({
    upstreamStatus: upstream.statusCode,
    response: journal,
    ...tokens,
    usage: tokens.usage ?? usageFromTokens(tokens.promptIds, tokens.choices),
    ttftMs: ttft,
  });
  res.writeHead(upstream.statusCode, relayedHeaders(upstream.headers, Buffer.byteLength(out)));
  res.end(out);
}
