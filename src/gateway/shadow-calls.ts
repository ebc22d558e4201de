import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { CallEndpoint, ShadowCallRecord, TraceStore } from '../store/trace-store.js';
import { backendRefusal, classify, journalShare, parseJson, readReply } from './backend-reply.js';
import { extractTokens, stripInjected, upstreamRequest, withoutTokenIds, type Injected } from './openai-shapes.js';
import type { JsonObject } from './openai-types.js';
import type { ProxiedCall } from './proxied-call.js';
import type { RedactionRule } from './redact.js';
import type { MirrorRoute, Route } from './routing.js';
import { withoutSecretIds } from './secret-ids.js';

/** Sends a request to a route's backend (BackendPools.send, through the proxy's pools). */
export type SendToBackend = (
  route: Route,
  endpoint: CallEndpoint,
  text: string,
  harnessHeaders: IncomingHttpHeaders,
  stream: boolean,
  signal: AbortSignal,
) => Promise<Dispatcher.ResponseData>;

/**
 * Mirror mode's shadow calls: a mirrored call also goes to the candidate, in the background, and
 * its answer is journaled as a shadow call and never returned.
 */
export class ShadowCalls {
  /** Shadow calls in flight; close() aborts and awaits them, so none outlives the gateway. */
  private readonly shadows = new Set<Promise<void>>();
  private readonly closing = new AbortController();

  constructor(
    private readonly store: TraceStore,
    private readonly redaction: readonly RedactionRule[],
    /** Past it a mirrored call is journaled as skipped (gateway.maxShadowsInFlight). */
    private readonly maxInFlight: number,
    private readonly sendToBackend: SendToBackend,
  ) {
    // Every shadow call in flight listens on it: hundreds are expected, not a leak.
    setMaxListeners(0, this.closing.signal);
  }

  /** Aborts the shadow calls in flight and waits until each is journaled (or dropped). */
  async close(): Promise<void> {
    this.closing.abort();
    await Promise.all([...this.shadows]);
  }

  start(
    call: ProxiedCall,
    incumbent: Route,
    candidate: MirrorRoute,
    primaryCallId: string,
    receivedForJournal: JsonObject,
  ): void {
    if (this.closing.signal.aborted) {
      // Shutting down: a shadow sent now could not be journaled before the store closes.
      candidate.release();
      return;
    }
    // Past the cap the shadow is journaled as skipped, so the report still counts every mirrored call.
    const overloaded = this.shadows.size >= this.maxInFlight;
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
    receivedForJournal: JsonObject,
    overloaded: boolean,
  ): Promise<void> {
    const { store, redaction } = this;
    // Always non-streamed: nobody reads it as it arrives, and one body is simpler to time out and journal.
    const { sent, sentText, injected } = upstreamRequest(
      call.endpoint,
      call.body,
      call.text,
      candidate.model,
      candidate.backend,
      true,
    );
    const startedAt = Date.now();
    const t0 = performance.now();
    const sentForJournal = journalShare(sent, call.body, receivedForJournal, redaction);
    const record = (
      result: Pick<ShadowCallRecord, 'upstreamStatus' | 'errorClass' | 'errorMessage'> & Partial<ShadowCallRecord>,
    ) =>
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
      await record({
        upstreamStatus: null,
        errorClass: 'gateway_error',
        errorMessage: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      });
    }
  }

  private async shadowExchange(
    call: ProxiedCall,
    candidate: MirrorRoute,
    sentText: string,
    injected: Injected,
    record: (
      result: Pick<ShadowCallRecord, 'upstreamStatus' | 'errorClass' | 'errorMessage'> & Partial<ShadowCallRecord>,
    ) => Promise<void>,
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
      return record({
        upstreamStatus,
        errorClass: failure.errorClass as ShadowCallRecord['errorClass'],
        errorMessage: failure.message,
      });
    };
    let upstream;
    try {
      upstream = await this.sendToBackend(candidate, call.endpoint, sentText, call.headers, false, signal);
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
        errorMessage: backendRefusal(upstream.statusCode, text, "the candidate's backend"),
      });
      return;
    }
    const { response, problem } = readReply(call.endpoint, text);
    if (!response) {
      await record({
        upstreamStatus: upstream.statusCode,
        errorClass: 'upstream_bad_response',
        errorMessage: `the candidate's response is not one the gateway can read: ${problem}`,
      });
      return;
    }
    const { choices } = extractTokens(call.endpoint, response);
    stripInjected(response, injected);
    await record({
      upstreamStatus: upstream.statusCode,
      response: withoutTokenIds(response),
      choices,
      errorClass: null,
      errorMessage: null,
    });
  }
}
