import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { errors as undiciErrors, Pool } from 'undici';
import type { GatewayMetrics } from '../metrics/gateway-metrics.js';
import type { CallEndpoint, CallErrorClass, CallFinish, ShadowCallRecord, TraceStore } from '../store/trace-store.js';
import type { GatewayTracing } from '../telemetry/gateway-tracing.js';
import { GatewayCallError, GatewayHttpError } from './errors.js';
import { MAX_JSON_DEPTH, nestedDeeperThan } from './json-text.js';
import {
  anythingInjected,
  extractTokens,
  responseProblem,
  SseParser,
  StreamAssembler,
  stripInjected,
  stripInjectedText,
  upstreamRequest,
  usageFromTokens,
  withoutTokenIds,
  type Injected,
} from './openai-shapes.js';
import { redact, type RedactionRule } from './redact.js';
import { withoutSecretIds } from './secret-ids.js';
import { RoutingError, type MirrorRoute, type Route, type Router } from './routing.js';

type Json = Record<string, unknown>;

export interface ProxyOptions {
  store: TraceStore;
  router: Router;
  redaction: readonly RedactionRule[];
  /** Longest wait for the backend's response headers (a non-streamed generation arrives whole). */
  headersTimeoutMs: number;
  /** Longest silence between two pieces of a response body. */
  bodyTimeoutMs: number;
  /** Shadow calls (mirror mode) in flight at most; past it a mirrored call is journaled as skipped. Default 256. */
  maxShadowsInFlight?: number;
  /** Where each journaled call is counted and timed for /metrics. */
  metrics?: GatewayMetrics;
  /** Where each call becomes an OpenTelemetry span (gateway.tracing). */
  tracing?: GatewayTracing | undefined;
}

export interface ProxiedCall {
  rolloutId: string;
  attempt: number;
  endpoint: CallEndpoint;
  body: Json;
  /** The body as the harness sent it: the backend gets these bytes, with only the gateway's additions made. */
  text: string;
  /** The harness's request headers; those that are not about this hop or the harness's key reach the backend. */
  headers: IncomingHttpHeaders;
  /** The policy version the rollout is pinned to, if any (then the requested model only has to exist). */
  pinnedPolicyVersion?: string | null;
  /** Aborted when the harness goes away. */
  signal: AbortSignal;
}

/** Routing refusals that are Rein's doing (a version it pinned is not routed, or is mid weight update). */
const ROUTING_FAULTS = new Set(['pinned_policy_missing', 'policy_paused']);

/** Request headers that belong to the hop to the gateway or to the harness's key, not to the backend. */
const NOT_FORWARDED = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'content-length',
  'authorization',
  'api-key',
  'x-api-key',
  // The gateway reads the response: it has to arrive uncompressed.
  'accept-encoding',
]);

/** Response headers that belong to the hop from the backend (or that the gateway sets itself). */
const NOT_RELAYED = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'content-length']);

const PATHS: Record<CallEndpoint, string> = {
  'chat.completions': '/chat/completions',
  completions: '/completions',
  responses: '/responses',
};

/**
 * Forwards one model call to its backend and journals it: the call is written before it is
 * forwarded, and its outcome is written before the last byte reaches the harness.
 */
export class ModelCallProxy {
  private readonly pools = new Map<string, Pool>();
  private readonly endpoints = new Map<string, { pool: Pool; basePath: string }>();
  /** Shadow calls in flight; close() aborts and awaits them, so none outlives the gateway. */
  private readonly shadows = new Set<Promise<void>>();
  private readonly closing = new AbortController();

  constructor(private readonly options: ProxyOptions) {
    // Every shadow call in flight listens on it: hundreds are expected, not a leak.
    setMaxListeners(0, this.closing.signal);
  }

  async handle(call: ProxiedCall, res: ServerResponse): Promise<void> {
    let admitted;
    try {
      admitted = this.options.router.admit(call.body.model, call.rolloutId, call.pinnedPolicyVersion ?? undefined);
    } catch (err) {
      // Rein's routing failed the call, not the harness: journal it, so the rollout is classed infrastructure.
      if (err instanceof RoutingError && ROUTING_FAULTS.has(err.code)) await this.journalRefusal(call, err).catch(() => undefined);
      throw err;
    }
    const { route, release, mirror } = admitted;
    let mirrored = false;
    try {
      await this.forward(call, route, res, (callId, receivedForJournal) => {
        if (!mirror) return;
        mirrored = true;
        this.mirror(call, route, mirror, callId, receivedForJournal);
      });
    } finally {
      release();
      // The production call failed before it was journaled: there is nothing to shadow.
      if (mirror && !mirrored) mirror.release();
    }
  }

  private async journalRefusal(call: ProxiedCall, err: RoutingError): Promise<void> {
    const { store, redaction } = this.options;
    const id = `call-${randomUUID()}`;
    const received = redact(call.body, redaction);
    await store.beginCall({
      id,
      rolloutId: call.rolloutId,
      attempt: call.attempt,
      endpoint: call.endpoint,
      policyVersion: call.pinnedPolicyVersion ?? String(call.body.model),
      backendUrl: '',
      stream: call.body.stream === true,
      requestReceived: received,
      requestSent: received,
      startedAt: Date.now(),
    });
    await store.finishCall(id, {
      response: undefined,
      promptIds: null,
      choices: [],
      usage: null,
      upstreamStatus: null,
      errorClass: 'policy_unavailable',
      errorMessage: `${err.status} ${err.code}: ${err.message}`,
      ttftMs: null,
      latencyMs: 0,
    });
    this.options.metrics?.callFinished(call.endpoint, 'policy_unavailable', 0, null, null);
    this.options.tracing
      ?.callStarted({ callId: id, rolloutId: call.rolloutId, attempt: call.attempt, endpoint: call.endpoint, request: received, headers: call.headers, policyVersion: call.pinnedPolicyVersion ?? String(call.body.model), startedAt: Date.now() })
      ?.end({ upstreamStatus: null, errorClass: 'policy_unavailable', errorMessage: `${err.status} ${err.code}: ${err.message}` }, 0);
  }

  async close(): Promise<void> {
    this.closing.abort();
    await Promise.all([...this.shadows]);
    await Promise.all([...this.pools.values()].map((pool) => pool.close()));
  }

  /**
   * @param journaled runs once the call is journaled, before it is forwarded: the moment its
   *   shadow (if mirrored) starts.
   */
  private async forward(
    call: ProxiedCall,
    route: Route,
    res: ServerResponse,
    journaled: (callId: string, receivedForJournal: Json) => void,
  ): Promise<void> {
    const { store, redaction, metrics } = this.options;
    const { sent, sentText, injected } = upstreamRequest(call.endpoint, call.body, call.text, route.model, route.backend);
    const callId = `call-${randomUUID()}`;
    const startedAt = Date.now();
    const t0 = performance.now();
    // Sent shares most values (the whole conversation) with received: redact those once and keep
    // them the same objects, so the journal recognises them without comparing their contents.
    const receivedForJournal = redact(call.body, redaction);
    const sentForJournal = journalShare(sent, call.body, receivedForJournal, redaction);
    const beginAt = performance.now();
    await store.beginCall({
      id: callId,
      rolloutId: call.rolloutId,
      attempt: call.attempt,
      endpoint: call.endpoint,
      policyVersion: route.policyVersion,
      backendUrl: route.endpoint,
      stream: call.body.stream === true,
      requestReceived: receivedForJournal,
      requestSent: sentForJournal,
      startedAt,
    });
    metrics?.journalWrite('begin', performance.now() - beginAt);
    journaled(callId, receivedForJournal);
    const span = this.options.tracing?.callStarted({ callId, rolloutId: call.rolloutId, attempt: call.attempt, endpoint: call.endpoint, request: receivedForJournal, headers: call.headers, policyVersion: route.policyVersion, route, startedAt });
    // The backend's own spans (vLLM traces too) become children of the call's span.
    if (span) call = { ...call, headers: span.forwardedHeaders(call.headers) };
    let finished = false;
    const finish: Finish = async (result) => {
      const latencyMs = performance.now() - t0;
      span?.end(result, latencyMs);
      await store.finishCall(callId, {
        response: undefined,
        promptIds: null,
        choices: [],
        usage: null,
        errorClass: null,
        errorMessage: null,
        ttftMs: null,
        latencyMs,
        ...withoutSecretIds(result, receivedForJournal !== call.body, redaction),
      });
      finished = true;
      if (metrics) {
        metrics.journalWrite('finish', performance.now() - t0 - latencyMs);
        metrics.callFinished(call.endpoint, result.errorClass ?? null, latencyMs, result.ttftMs ?? null, result.usage);
      }
    };
    res.setHeader('x-rein-call-id', callId);
    res.setHeader('x-rein-policy-version', route.policyVersion);
    metrics?.callStarted();
    try {
      await this.exchange(call, route, res, sentText, injected, finish, t0);
    } catch (err) {
      if (finished) throw err;
      // Whatever went wrong, the row must not stay in flight: a call in flight forever looks alive to everyone who reads the journal.
      const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      await finish({ upstreamStatus: null, errorClass: 'gateway_error', errorMessage: message }).catch(() => undefined);
      throw err instanceof GatewayHttpError ? err : new GatewayCallError(callId, err);
    } finally {
      metrics?.callEnded();
    }
  }

  private async exchange(call: ProxiedCall, route: Route, res: ServerResponse, sentText: string, injected: Injected, finish: Finish, t0: number): Promise<void> {
    let upstream;
    try {
      upstream = await this.send(route, call.endpoint, sentText, call.headers, call.body.stream === true, call.signal);
    } catch (err) {
      const failure = classify(err, call.signal, false);
      await finish({ upstreamStatus: null, errorClass: failure.errorClass, errorMessage: failure.message });
      throw failure.httpError(route);
    }

    const ttft = performance.now() - t0;
    const contentType = String(upstream.headers['content-type'] ?? '');
    if (upstream.statusCode >= 200 && upstream.statusCode < 300 && contentType.includes('text/event-stream')) {
      await this.relayStream(call, upstream, res, injected, finish, t0);
      return;
    }

    let text: string;
    try {
      text = await upstream.body.text();
    } catch (err) {
      const failure = classify(err, call.signal, true);
      await finish({ upstreamStatus: upstream.statusCode, errorClass: failure.errorClass, errorMessage: failure.message, ttftMs: ttft });
      throw failure.httpError(route);
    }
    if (upstream.statusCode < 200 || upstream.statusCode >= 300) {
      // The harness sees the backend's own error, as it would without the gateway.
      await finish({
        upstreamStatus: upstream.statusCode,
        response: parseJson(text) ?? text,
        errorClass: 'upstream_http_error',
        errorMessage: `backend answered ${upstream.statusCode}`,
        ttftMs: ttft,
      });
      res.writeHead(upstream.statusCode, relayedHeaders(upstream.headers, Buffer.byteLength(text)));
      res.end(text);
      return;
    }
    const response = parseJson(text);
    const problem = response ? responseProblem(call.endpoint, response) : `${text.length} bytes that are not a JSON object (of at most ${MAX_JSON_DEPTH} levels)`;
    if (!response || problem) {
      await finish({
        upstreamStatus: upstream.statusCode,
        errorClass: 'upstream_bad_response',
        errorMessage: `the backend's response is not one the gateway can read: ${problem}`,
        ttftMs: ttft,
      });
      throw badResponse(route);
    }
    const tokens = extractTokens(call.endpoint, response);
    stripInjected(response, injected);
    await finish({ upstreamStatus: upstream.statusCode, response: withoutTokenIds(response), ...tokens, usage: tokens.usage ?? usageFromTokens(tokens.promptIds, tokens.choices), ttftMs: ttft });
    const out = stripInjectedText(text, injected);
    res.writeHead(upstream.statusCode, relayedHeaders(upstream.headers, Buffer.byteLength(out)));
    res.end(out);
  }

  private async relayStream(
    call: ProxiedCall,
    upstream: { statusCode: number; headers: IncomingHttpHeaders; body: AsyncIterable<Buffer> },
    res: ServerResponse,
    injected: Injected,
    finish: Finish,
    t0: number,
  ): Promise<void> {
    res.writeHead(upstream.statusCode, relayedHeaders(upstream.headers));
    res.flushHeaders();
    const parser = new SseParser();
    const assembler = new StreamAssembler(call.endpoint);
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
          const problem = chunk ? responseProblem(call.endpoint, chunk, true) : 'an event whose data is not a JSON object';
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
          out += anythingInjected(injected) ? withData(event, stripInjectedText(event.data, injected)) : event.raw;
        }
        if (out !== '') {
          ttftMs ??= performance.now() - t0;
          res.write(out);
        }
      }
      const tail = decoder.decode();
      if (tail !== '') parser.push(tail);
      if (done === undefined && call.endpoint !== 'responses') {
        failure = { errorClass: 'upstream_stream_cut', message: 'the backend ended the stream without [DONE]' };
      }
    } catch (err) {
      failure = classify(err, call.signal, true);
    }
    if (!failure && badChunk !== undefined) {
      failure = { errorClass: 'upstream_bad_response', message: `the backend's stream holds a chunk the gateway cannot read: ${badChunk}` };
    }
    const assembled = assembler.response();
    const tokens = extractTokens(call.endpoint, assembled);
    stripInjected(assembled, injected);
    await finish({
      upstreamStatus: upstream.statusCode,
      response: withoutTokenIds(assembled),
      ...tokens,
      usage: tokens.usage ?? usageFromTokens(tokens.promptIds, tokens.choices),
      ttftMs,
      errorClass: failure?.errorClass ?? null,
      errorMessage: failure?.message ?? null,
    });
    if (failure && failure.errorClass !== 'upstream_bad_response') {
      // The harness sees a broken stream, as it would have from the backend directly.
      res.destroy();
      return;
    }
    res.end(done ?? parser.rest());
  }

  /** Sends the call to the candidate in the background; its outcome goes to the journal only. */
  private mirror(call: ProxiedCall, incumbent: Route, candidate: MirrorRoute, primaryCallId: string, receivedForJournal: Json): void {
    if (this.closing.signal.aborted) {
      // Shutting down: a shadow sent now could not be journaled before the store closes.
      candidate.release();
      return;
    }
    // Past the cap the shadow is journaled as skipped, so the report still counts every mirrored call.
    const overloaded = this.shadows.size >= (this.options.maxShadowsInFlight ?? 256);
    const shadow = this.shadow(call, incumbent, candidate, primaryCallId, receivedForJournal, overloaded)
      // A shadow that cannot even be journaled is dropped: it must never reach production.
      .catch(() => undefined)
      .finally(() => {
        candidate.release();
        this.shadows.delete(shadow);
      });
    this.shadows.add(shadow);
  }

  private async shadow(
    call: ProxiedCall,
    incumbent: Route,
    candidate: MirrorRoute,
    primaryCallId: string,
    receivedForJournal: Json,
    overloaded: boolean,
  ): Promise<void> {
    const { store, redaction } = this.options;
    // Always non-streamed: nobody reads it as it arrives, and one body is simpler to time out and journal.
    const { sent, sentText, injected } = upstreamRequest(call.endpoint, call.body, call.text, candidate.model, candidate.backend, true);
    const startedAt = Date.now();
    const t0 = performance.now();
    const sentForJournal = journalShare(sent, call.body, receivedForJournal, redaction);
    const record = (result: Pick<ShadowCallRecord, 'upstreamStatus' | 'errorClass' | 'errorMessage'> & Partial<ShadowCallRecord>) =>
      store.recordShadowCall({
        id: `shadow-${randomUUID()}`,
        primaryCallId,
        rolloutId: call.rolloutId,
        attempt: call.attempt,
        candidateVersion: candidate.policyVersion,
        incumbentVersion: incumbent.policyVersion,
        endpoint: call.endpoint,
        backendUrl: candidate.endpoint,
        requestSent: sentForJournal,
        response: null,
        choices: [],
        status: result.errorClass ? 'error' : 'ok',
        latencyMs: performance.now() - t0,
        startedAt,
        // Redacted as a primary call is, token ids and log-probs of what was redacted included.
        ...withoutSecretIds(result, receivedForJournal !== call.body, redaction),
      });
    try {
      await this.shadowExchange(call, candidate, sentText, injected, record, overloaded);
    } catch (err) {
      // Whatever went wrong, the mirrored call is counted: the report must see every one.
      await record({ upstreamStatus: null, errorClass: 'gateway_error', errorMessage: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
    }
  }

  private async shadowExchange(
    call: ProxiedCall,
    candidate: MirrorRoute,
    sentText: string,
    injected: Injected,
    record: (result: Pick<ShadowCallRecord, 'upstreamStatus' | 'errorClass' | 'errorMessage'> & Partial<ShadowCallRecord>) => Promise<void>,
    overloaded: boolean,
  ): Promise<void> {
    if (overloaded) {
      await record({
        upstreamStatus: null,
        errorClass: 'shadow_overloaded',
        errorMessage: `not sent: ${this.shadows.size} shadow calls were in flight already (gateway.maxShadowsInFlight)`,
      });
      return;
    }

    const signal = this.closing.signal;
    const failed = (err: unknown, afterHeaders: boolean, upstreamStatus: number | null) => {
      const failure = signal.aborted
        ? { errorClass: 'gateway_closed' as const, message: 'the gateway closed before the candidate answered' }
        : classify(err, signal, afterHeaders);
      return record({ upstreamStatus, errorClass: failure.errorClass as ShadowCallRecord['errorClass'], errorMessage: failure.message });
    };
    let upstream;
    try {
      upstream = await this.send(candidate, call.endpoint, sentText, call.headers, false, signal);
    } catch (err) {
      await failed(err, false, null);
      return;
    }
    let text: string;
    try {
      text = await upstream.body.text();
    } catch (err) {
      await failed(err, true, upstream.statusCode);
      return;
    }
    if (upstream.statusCode < 200 || upstream.statusCode >= 300) {
      await record({
        upstreamStatus: upstream.statusCode,
        response: parseJson(text) ?? text,
        errorClass: 'upstream_http_error',
        errorMessage: `candidate backend answered ${upstream.statusCode}`,
      });
      return;
    }
    const response = parseJson(text);
    const problem = response ? responseProblem(call.endpoint, response) : `${text.length} bytes that are not a JSON object (of at most ${MAX_JSON_DEPTH} levels)`;
    if (!response || problem) {
      await record({
        upstreamStatus: upstream.statusCode,
        errorClass: 'upstream_bad_response',
        errorMessage: `the candidate's response is not one the gateway can read: ${problem}`,
      });
      return;
    }
    const { choices } = extractTokens(call.endpoint, response);
    stripInjected(response, injected);
    await record({ upstreamStatus: upstream.statusCode, response: withoutTokenIds(response), choices, errorClass: null, errorMessage: null });
  }

  /** The request to a route's backend, for a production call and its shadow alike. */
  private send(route: Route, endpoint: CallEndpoint, text: string, harnessHeaders: IncomingHttpHeaders, stream: boolean, signal: AbortSignal) {
    const { pool, basePath } = this.upstream(route.endpoint);
    const headers: Record<string, string | string[]> = {};
    const hopHeaders = new Set(String(harnessHeaders.connection ?? '').toLowerCase().split(',').map((h) => h.trim()));
    for (const [name, value] of Object.entries(harnessHeaders)) {
      if (value !== undefined && !NOT_FORWARDED.has(name) && !hopHeaders.has(name)) headers[name] = value;
    }
    headers['content-type'] ??= 'application/json';
    if (stream) headers.accept ??= 'text/event-stream';
    else headers.accept = 'application/json';
    if (route.backend.apiKey) headers.authorization = `Bearer ${route.backend.apiKey}`;
    return pool.request({
      method: 'POST',
      path: `${basePath}${PATHS[endpoint]}`,
      headers,
      body: text,
      signal,
      headersTimeout: this.options.headersTimeoutMs,
      bodyTimeout: this.options.bodyTimeoutMs,
    });
  }

  private upstream(endpoint: string): { pool: Pool; basePath: string } {
    let known = this.endpoints.get(endpoint);
    if (!known) {
      const url = new URL(endpoint);
      let pool = this.pools.get(url.origin);
      if (!pool) {
        pool = new Pool(url.origin, { connections: 512, keepAliveTimeout: 30_000, pipelining: 1 });
        this.pools.set(url.origin, pool);
      }
      known = { pool, basePath: url.pathname.replace(/\/$/, '') };
      this.endpoints.set(endpoint, known);
    }
    return known;
  }
}

type Finish = (result: Partial<CallFinish> & Pick<CallFinish, 'upstreamStatus'>) => Promise<void>;

/** The request as sent, for the journal: the values it shares with the received one are the same (already redacted) objects. */
function journalShare(sent: Json, received: Json, receivedForJournal: Json, redaction: readonly RedactionRule[]): Json {
  const out: Json = {};
  for (const [key, value] of Object.entries(sent)) {
    const shared = value === received[key] ? receivedForJournal[key] : redact(value, redaction);
    // As a data property, so that even a key named __proto__ stays a plain key.
    Object.defineProperty(out, key, { value: shared, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** The backend's response headers for the harness, less those of the hop (and content-length, which the body being sent sets). */
function relayedHeaders(headers: IncomingHttpHeaders, contentLength?: number): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !NOT_RELAYED.has(name)) out[name] = value;
  }
  if (contentLength !== undefined) out['content-length'] = contentLength;
  return out;
}

/** An SSE event with its data replaced, every other line as it was. */
function withData(event: { raw: string }, data: string): string {
  if (event.raw.startsWith('data: ') && event.raw.indexOf('\n') === event.raw.length - 2) return `data: ${data}\n\n`;
  const lines = event.raw.split(/\r?\n/).filter((line) => line !== '');
  const first = lines.findIndex((line) => line.startsWith('data:'));
  const kept = lines.filter((line) => !line.startsWith('data:'));
  kept.splice(first, 0, `data: ${data}`);
  return `${kept.join('\n')}\n\n`;
}

/** A JSON object, or undefined for anything else (including nesting deeper than the gateway walks). */
function parseJson(text: string): Json | undefined {
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}

function badResponse(route: Route): GatewayHttpError {
  return new GatewayHttpError(502, 'upstream_bad_response', `backend ${route.backendName} returned a response the gateway cannot read; the call's journal entry says why`);
}

/**
 * Why the backend exchange failed: the journal gets the details, the harness a message that
 * names the backend by its configured name only (its address and the exception are internals).
 */
function classify(
  err: unknown,
  signal: AbortSignal,
  afterHeaders: boolean,
): { errorClass: CallErrorClass; message: string; httpError: (route: Route) => GatewayHttpError } {
  const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  if (signal.aborted) {
    return {
      errorClass: 'client_disconnected',
      message: 'the harness closed the connection',
      httpError: () => new GatewayHttpError(499, 'client_disconnected', 'client went away'),
    };
  }
  if (err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError) {
    return {
      errorClass: 'upstream_timeout',
      message,
      httpError: (route) => new GatewayHttpError(504, 'upstream_timeout', `backend ${route.backendName} did not answer in time`),
    };
  }
  return {
    errorClass: afterHeaders ? 'upstream_stream_cut' : 'upstream_unreachable',
    message,
    httpError: (route) =>
      new GatewayHttpError(
        502,
        afterHeaders ? 'upstream_stream_cut' : 'upstream_unreachable',
        `backend ${route.backendName} ${afterHeaders ? 'broke off its response' : 'is unreachable'}`,
      ),
  };
}
