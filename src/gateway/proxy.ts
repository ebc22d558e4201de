import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { GatewayMetrics } from '../metrics/gateway-metrics.js';
import type { TraceStore } from '../store/trace-store.js';
import type { GatewayTracing } from '../telemetry/gateway-tracing.js';
import type { BackendLimits } from './backend-limits.js';
import { BackendPools } from './backend-pools.js';
import { classify, journalShare, type Finish } from './backend-reply.js';
import { GatewayCallError, GatewayHttpError } from './errors.js';
import { transparentReply, translatedReply, type HarnessReply } from './harness-reply.js';
import { upstreamRequest } from './openai-shapes.js';
import type { JsonObject, RequestBody } from './openai-types.js';
import type { ProxiedCall } from './proxied-call.js';
import { redact, type RedactionRule } from './redact.js';
import { RoutingError, type Route, type Router } from './routing.js';
import { ResponseChains } from './response-chains.js';
import { withoutSecretIds } from './secret-ids.js';
import { ShadowCalls } from './shadow-calls.js';
import { relayStream } from './stream-relay.js';
import { upstreamPlan, type UpstreamPlan } from './upstream-plan.js';
import { TokenInPrompts } from './token-in/token-in.js';
import { relayWhole } from './whole-relay.js';

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
  /** Backends' limits on calls in flight (gateway.backends.*.maxInFlight); none when unset. */
  limits?: BackendLimits;
}

export type { ProxiedCall } from './proxied-call.js';

const noSlot = (): void => undefined;

/**
 * Routing refusals that are Rein's doing (a version it pinned is not routed, or is mid weight update, or its backend
 * stayed at its limit of calls in flight).
 */
const ROUTING_FAULTS = new Set(['pinned_policy_missing', 'policy_paused', 'backend_at_limit']);

/**
 * Forwards one model call to its backend and journals it: the call is written before it is
 * forwarded, and its outcome is written before the last byte reaches the harness.
 */
export class ModelCallProxy {
  private readonly backends: BackendPools;
  private readonly shadowCalls: ShadowCalls;
  private readonly chains: ResponseChains;
  private readonly tokenIn: TokenInPrompts;

  constructor(private readonly options: ProxyOptions) {
    this.chains = new ResponseChains(options.store);
    this.tokenIn = new TokenInPrompts(options.store);
    this.backends = new BackendPools(options.headersTimeoutMs, options.bodyTimeoutMs);
    this.shadowCalls = new ShadowCalls(
      options.store,
      options.redaction,
      options.maxShadowsInFlight ?? 256,
      (...request) => this.backends.send(...request),
    );
  }

  async handle(call: ProxiedCall, res: ServerResponse): Promise<void> {
    let admitted;
    try {
      admitted = this.options.router.admit(call.body.model, call.rolloutId, call.pinnedPolicyVersion ?? undefined);
    } catch (err) {
      // Rein's routing failed the call, not the harness: journal it, so the rollout is classed infrastructure.
      if (err instanceof RoutingError && ROUTING_FAULTS.has(err.code))
        await this.journalRefusal(call, err).catch(() => undefined);
      throw err;
    }
    const { route, release, mirror } = admitted;
    let leave: () => void;
    try {
      // Under the limit the slot is there at once: no await on the hot path.
      const slot = this.backendSlot(route, call.signal);
      leave = typeof slot === 'function' ? slot : await slot;
    } catch (err) {
      release();
      mirror?.release();
      if (err instanceof RoutingError) await this.journalRefusal(call, err).catch(() => undefined);
      throw err;
    }
    let mirrored = false;
    try {
      await this.forward(call, route, res, (callId, receivedForJournal, plan) => {
        if (!mirror) return;
        mirrored = true;
        // A translated call's shadow asks the candidate the same chat question (and is journaled as such).
        if (!plan.translation) return this.shadowCalls.start(call, route, mirror, callId, receivedForJournal);
        const asked = { ...call, endpoint: plan.endpoint, body: plan.body, text: plan.text };
        this.shadowCalls.start(asked, route, mirror, callId, redact(plan.body, this.options.redaction));
      });
    } finally {
      leave();
      release();
      // The production call failed before it was journaled: there is nothing to shadow.
      if (mirror && !mirrored) mirror.release();
    }
  }

  /**
   * A slot among the backend's calls in flight: at once (no await) under its limit or where it has none, else when
   * one frees up, in arrival order.
   */
  private backendSlot(route: Route, signal: AbortSignal): (() => void) | Promise<() => void> {
    return this.options.limits ? this.options.limits.enter(route.backendName, signal) : noSlot;
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
      ?.callStarted({
        callId: id,
        rolloutId: call.rolloutId,
        attempt: call.attempt,
        endpoint: call.endpoint,
        request: received,
        headers: call.headers,
        policyVersion: call.pinnedPolicyVersion ?? String(call.body.model),
        startedAt: Date.now(),
      })
      ?.end(
        {
          upstreamStatus: null,
          errorClass: 'policy_unavailable',
          errorMessage: `${err.status} ${err.code}: ${err.message}`,
        },
        0,
      );
  }

  async close(): Promise<void> {
    await this.shadowCalls.close();
    await this.backends.close();
  }

  /**
   * @param journaled runs once the call is journaled, before it is forwarded: the moment its
   *   shadow (if mirrored) starts.
   */
  private async forward(
    call: ProxiedCall,
    route: Route,
    res: ServerResponse,
    journaled: (callId: string, receivedForJournal: JsonObject, plan: UpstreamPlan) => void,
  ): Promise<void> {
    const { store, redaction, metrics } = this.options;
    const plan = await this.tokenIn.planned(call, route.backend, await upstreamPlan(call, route.backend, this.chains));
    const { sent, sentText, injected } = upstreamRequest(
      plan.endpoint,
      plan.body,
      plan.text,
      route.model,
      route.backend,
    );
    const reply = plan.translation
      ? translatedReply(plan.translation, call.body, injected)
      : transparentReply(call.endpoint, injected);
    const callId = `call-${randomUUID()}`;
    const startedAt = Date.now();
    const t0 = performance.now();
    const receivedForJournal = await this.journalBegin(call, route, sent, callId, startedAt);
    journaled(callId, receivedForJournal, plan);
    const span = this.options.tracing?.callStarted({
      callId,
      rolloutId: call.rolloutId,
      attempt: call.attempt,
      endpoint: call.endpoint,
      request: receivedForJournal,
      headers: call.headers,
      policyVersion: route.policyVersion,
      route,
      startedAt,
    });
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
      if (plan.expandedInput !== undefined && !result.errorClass && result.response !== undefined)
        this.chains.answered(call.body, plan.expandedInput, result.response);
      if (metrics) {
        metrics.journalWrite('finish', performance.now() - t0 - latencyMs);
        metrics.callFinished(call.endpoint, result.errorClass ?? null, latencyMs, result.ttftMs ?? null, result.usage);
      }
    };
    res.setHeader('x-rein-call-id', callId);
    res.setHeader('x-rein-policy-version', route.policyVersion);
    metrics?.callStarted();
    try {
      await this.exchange(call, route, res, sentText, reply, finish, t0);
    } catch (err) {
      if (finished) throw err;
      // Whatever went wrong, the row must not stay in flight: a call in flight forever looks alive to everyone who
      // reads the journal.
      const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      await finish({ upstreamStatus: null, errorClass: 'gateway_error', errorMessage: message }).catch(() => undefined);
      throw err instanceof GatewayHttpError ? err : new GatewayCallError(callId, err);
    } finally {
      metrics?.callEnded();
    }
  }

  /**
   * Writes the call's row, before it is forwarded. Returns the request as received, redacted: what
   * the journal holds of it.
   */
  private async journalBegin(
    call: ProxiedCall,
    route: Route,
    sent: RequestBody,
    callId: string,
    startedAt: number,
  ): Promise<RequestBody> {
    const { store, redaction, metrics } = this.options;
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
    return receivedForJournal;
  }

  private async exchange(
    call: ProxiedCall,
    route: Route,
    res: ServerResponse,
    sentText: string,
    reply: HarnessReply,
    finish: Finish,
    t0: number,
  ): Promise<void> {
    let upstream;
    try {
      upstream = await this.backends.send(
        route,
        reply.upstream,
        sentText,
        call.headers,
        call.body.stream === true,
        call.signal,
      );
    } catch (err) {
      const failure = classify(err, call.signal, false);
      await finish({ upstreamStatus: null, errorClass: failure.errorClass, errorMessage: failure.message });
      throw failure.httpError(route);
    }

    const ttft = performance.now() - t0;
    const contentType = String(upstream.headers['content-type'] ?? '');
    if (upstream.statusCode >= 200 && upstream.statusCode < 300 && contentType.includes('text/event-stream')) {
      await relayStream(call, upstream, res, reply, finish, t0);
      return;
    }

    await relayWhole(call, route, upstream, res, reply, finish, ttft);
  }
}
