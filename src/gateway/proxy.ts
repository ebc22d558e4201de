import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { ServerResponse } from 'node:http';
import { errors as undiciErrors, Pool } from 'undici';
import type { CallEndpoint, CallErrorClass, CallFinish, ShadowCallRecord, TraceStore } from '../store/trace-store.js';
import {
  anythingInjected,
  extractTokens,
  SseParser,
  StreamAssembler,
  stripInjected,
  upstreamRequest,
  withoutTokenIds,
  type Injected,
} from './openai-shapes.js';
import { redact, type RedactionRule } from './redact.js';
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
}

export interface ProxiedCall {
  rolloutId: string;
  attempt: number;
  endpoint: CallEndpoint;
  body: Json;
  /** The policy version the rollout is pinned to, if any (then the requested model only has to exist). */
  pinnedPolicyVersion?: string | null;
  /** Aborted when the harness goes away. */
  signal: AbortSignal;
}

/** Routing refusals that are Rein's doing (a version it pinned is not routed, or is mid weight update). */
const ROUTING_FAULTS = new Set(['pinned_policy_missing', 'policy_paused']);

/** An error the harness receives as an OpenAI-style error body. */
export class GatewayHttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

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
    const { store, redaction } = this.options;
    const { sent, injected } = upstreamRequest(call.endpoint, call.body, route.model, route.backend);
    const callId = `call-${randomUUID()}`;
    const startedAt = Date.now();
    const t0 = performance.now();
    // Sent shares most values (the whole conversation) with received: redact those once and keep
    // them the same objects, so the journal recognises them without comparing their contents.
    const receivedForJournal = redact(call.body, redaction);
    const sentForJournal = Object.fromEntries(
      Object.entries(sent).map(([key, value]) => [key, value === call.body[key] ? receivedForJournal[key] : redact(value, redaction)]),
    );
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
    journaled(callId, receivedForJournal);
    const finish = (result: Partial<CallFinish> & Pick<CallFinish, 'upstreamStatus'>) =>
      store.finishCall(callId, {
        response: undefined,
        promptIds: null,
        choices: [],
        usage: null,
        errorClass: null,
        errorMessage: null,
        ttftMs: null,
        latencyMs: performance.now() - t0,
        ...result,
        ...(result.response !== undefined && { response: redact(result.response, redaction) }),
      });
    res.setHeader('x-rein-call-id', callId);
    res.setHeader('x-rein-policy-version', route.policyVersion);

    let upstream;
    try {
      upstream = await this.send(route, call.endpoint, sent, call.body.stream === true, call.signal);
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
      res.writeHead(upstream.statusCode, { 'content-type': contentType || 'application/json' });
      res.end(text);
      return;
    }
    const response = parseJson(text);
    if (!response) {
      await finish({
        upstreamStatus: upstream.statusCode,
        errorClass: 'upstream_bad_response',
        errorMessage: `backend returned ${text.length} bytes that are not a JSON object`,
        ttftMs: ttft,
      });
      throw new GatewayHttpError(502, 'upstream_bad_response', `backend ${route.backendName} returned a body that is not JSON`);
    }
    const tokens = extractTokens(call.endpoint, response);
    if (anythingInjected(injected)) stripInjected(response, injected);
    await finish({ upstreamStatus: upstream.statusCode, response: withoutTokenIds(response), ...tokens, ttftMs: ttft });
    res.writeHead(upstream.statusCode, { 'content-type': 'application/json' });
    res.end(anythingInjected(injected) ? JSON.stringify(response) : text);
  }

  private async relayStream(
    call: ProxiedCall,
    upstream: { statusCode: number; body: AsyncIterable<Buffer> & { setEncoding(e: string): void } },
    res: ServerResponse,
    injected: Injected,
    finish: (result: Partial<CallFinish> & Pick<CallFinish, 'upstreamStatus'>) => Promise<void>,
    t0: number,
  ): Promise<void> {
    res.writeHead(upstream.statusCode, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    res.flushHeaders();
    const parser = new SseParser();
    const assembler = new StreamAssembler(call.endpoint);
    const strip = anythingInjected(injected);
    let done: string | undefined;
    let ttftMs: number | null = null;
    let failure: ReturnType<typeof classify> | undefined;
    upstream.body.setEncoding('utf8');
    try {
      for await (const piece of upstream.body) {
        // The events that arrived together go out together: one write (one syscall), not one each.
        let out = '';
        for (const event of parser.push(piece as unknown as string)) {
          if (event.data === '[DONE]') {
            // Held back until the call is journaled: the harness's stream ends only after that.
            done = event.raw;
            continue;
          }
          const chunk = event.data === null ? undefined : parseJson(event.data);
          if (chunk) {
            assembler.add(chunk);
            if (strip) {
              if (stripInjected(chunk, injected)) out += `data: ${JSON.stringify(chunk)}\n\n`;
              continue;
            }
          }
          out += event.raw;
        }
        if (out !== '') {
          ttftMs ??= performance.now() - t0;
          res.write(out);
        }
      }
      if (done === undefined && call.endpoint !== 'responses') {
        failure = {
          errorClass: 'upstream_stream_cut',
          message: 'the backend ended the stream without [DONE]',
          httpError: () => new GatewayHttpError(502, 'upstream_stream_cut', 'stream cut'),
        };
      }
    } catch (err) {
      failure = classify(err, call.signal, true);
    }
    const assembled = assembler.response();
    const tokens = extractTokens(call.endpoint, assembled);
    if (strip) stripInjected(assembled, injected);
    await finish({
      upstreamStatus: upstream.statusCode,
      response: withoutTokenIds(assembled),
      ...tokens,
      ttftMs,
      errorClass: failure?.errorClass ?? null,
      errorMessage: failure?.message ?? null,
    });
    if (failure) {
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
    const { stream: _stream, stream_options: _streamOptions, ...unstreamed } = call.body;
    const { sent, injected } = upstreamRequest(call.endpoint, { ...unstreamed, stream: false }, candidate.model, candidate.backend);
    const startedAt = Date.now();
    const t0 = performance.now();
    const sentForJournal = Object.fromEntries(
      Object.entries(sent).map(([key, value]) => [key, value === call.body[key] ? receivedForJournal[key] : redact(value, redaction)]),
    );
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
        ...result,
        ...(result.response !== undefined && result.response !== null && { response: redact(result.response, redaction) }),
      });
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
      upstream = await this.send(candidate, call.endpoint, sent, false, signal);
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
    if (!response) {
      await record({
        upstreamStatus: upstream.statusCode,
        errorClass: 'upstream_bad_response',
        errorMessage: `candidate backend returned ${text.length} bytes that are not a JSON object`,
      });
      return;
    }
    const { choices } = extractTokens(call.endpoint, response);
    if (anythingInjected(injected)) stripInjected(response, injected);
    await record({ upstreamStatus: upstream.statusCode, response: withoutTokenIds(response), choices, errorClass: null, errorMessage: null });
  }

  /** The connection pool of an endpoint's origin, and the endpoint's path (parsed once per endpoint). */
  /** The request to a route's backend, for a production call and its shadow alike. */
  private send(route: Route, endpoint: CallEndpoint, sent: Json, stream: boolean, signal: AbortSignal) {
    const { pool, basePath } = this.upstream(route.endpoint);
    return pool.request({
      method: 'POST',
      path: `${basePath}${PATHS[endpoint]}`,
      headers: {
        'content-type': 'application/json',
        accept: stream ? 'text/event-stream' : 'application/json',
        ...(route.backend.apiKey && { authorization: `Bearer ${route.backend.apiKey}` }),
      },
      body: JSON.stringify(sent),
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

function parseJson(text: string): Json | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}

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
      httpError: (route) =>
        new GatewayHttpError(504, 'upstream_timeout', `backend ${route.backendName} (${route.endpoint}) did not answer in time`),
    };
  }
  return {
    errorClass: afterHeaders ? 'upstream_stream_cut' : 'upstream_unreachable',
    message,
    httpError: (route) =>
      new GatewayHttpError(
        502,
        afterHeaders ? 'upstream_stream_cut' : 'upstream_unreachable',
        `backend ${route.backendName} at ${route.endpoint} ${afterHeaders ? 'broke off its response' : 'is unreachable'}: ${message}`,
      ),
  };
}
