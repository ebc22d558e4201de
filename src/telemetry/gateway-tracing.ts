import type { IncomingHttpHeaders } from 'node:http';
import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BasicTracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
} from '@opentelemetry/semantic-conventions';
import { redact, type RedactionRule } from '../gateway/redact.js';
import type { Route } from '../gateway/routing.js';
import type { Logger } from '../log/logger.js';
import { isFinished, type Rollout, type RolloutEvent } from '../rollouts/rollout.js';
import type { CallEndpoint, CallFinish, TraceStore } from '../store/trace-store.js';
import { CountedExportQueue, type ExportStats } from './export-queue.js';
import { callSpanName, inputMessages, outputMessages, requestAttributes, responseAttributes } from './genai.js';
import { ChosenIds } from './ids.js';
import {
  readAttempt,
  rolloutSpanAttributes,
  rolloutSpanStatus,
  spanEventOf,
  type AttemptOutcome,
} from './rollout-span.js';
import type { TracingOptions } from './settings.js';
import { rolloutTraceIds, rolloutTraceparent, toolSpanId } from './trace-ids.js';

export type { TracingOptions };

/** A model call as it starts, for its span. */
export interface CallSpanStart {
  callId: string;
  rolloutId: string;
  attempt: number;
  endpoint: CallEndpoint;
  /** The request as journaled (redacted). */
  request: Record<string, unknown>;
  /** The harness's request headers: a `traceparent` among them makes the call its span's child. */
  headers: IncomingHttpHeaders;
  policyVersion: string;
  /** Where the call goes; none when the gateway refused it before routing. */
  route?: Pick<Route, 'backendName' | 'endpoint' | 'model'>;
  startedAt: number;
}

export interface CallSpan {
  /**
   * The headers for the backend: the harness's, with this span as the parent (`traceparent`) of what the backend
   * traces.
   */
  forwardedHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders;
  /** Ends the span with the call's outcome (as the journal gets it); only the first end counts. */
  end(result: Partial<CallFinish>, latencyMs: number): void;
}

/** Long enough for a conversation's messages, short enough for any OTLP backend's span size limit. */
const MAX_ATTRIBUTE_LENGTH = 128 * 1024;

/**
 * The gateway's OpenTelemetry traces. A rollout attempt is a trace whose ids derive from the
 * rollout id and attempt (trace-ids.ts), so every gateway process names the same one: its root
 * span covers the attempt from start to final status, with the verifier's reward (and every
 * status change, intervention and custom event) as span events; each model call is a span under
 * the GenAI conventions; each tool span the harness reports is a child span. A harness that sends
 * `traceparent` gets its calls' spans as children of its own span.
 *
 * Exporting runs in the background through a bounded queue: no call waits for it or fails by it.
 */
export class GatewayTracing {
  private readonly ids = new ChosenIds();
  private readonly queue: CountedExportQueue;
  private readonly provider: BasicTracerProvider;
  private readonly tracer: Tracer;
  private readonly propagator = new W3CTraceContextPropagator();
  /** Root spans being assembled from the store; close() waits for them. */
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly options: TracingOptions,
    private readonly deps: {
      store: TraceStore;
      redaction: readonly RedactionRule[];
      log: Pick<Logger, 'warn' | 'info'>;
    },
    exporter: SpanExporter = new OTLPTraceExporter({
      url: options.endpoint,
      headers: options.headers,
      timeoutMillis: options.exportTimeoutMs,
    }),
  ) {
    this.queue = new CountedExportQueue(exporter, {
      maxQueueSize: options.maxQueueSize,
      batchDelayMs: options.batchDelayMs,
      exportTimeoutMs: options.exportTimeoutMs,
      log: deps.log,
    });
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: options.serviceName }),
      // Every rollout is training evidence: Rein records all of them, whatever a harness's own sampling decided.
      sampler: new AlwaysOnSampler(),
      idGenerator: this.ids,
      spanProcessors: [this.queue],
      spanLimits: { attributeValueLengthLimit: MAX_ATTRIBUTE_LENGTH },
    });
    this.tracer = this.provider.getTracer('rein-gateway');
  }

  /** The `traceparent` a harness of this attempt gets (as TRACEPARENT), so its own spans join the rollout's trace. */
  traceparentOf(rolloutId: string, attempt: number): string {
    return rolloutTraceparent(rolloutId, attempt);
  }

  stats(): ExportStats {
    return this.queue.stats();
  }

  callStarted(call: CallSpanStart): CallSpan | undefined {
    try {
      return this.startCall(call);
    } catch (err) {
      this.deps.log.warn({ err, callId: call.callId }, 'tracing: could not start the call span');
      return undefined;
    }
  }

  /** A rollout changed status: a final status ends its attempt's trace. */
  statusChanged(rollout: Rollout): void {
    if (isFinished(rollout.status)) this.emitRoot(rollout.id, rollout.attempts, 'finished');
  }

  /** A rollout started another attempt: the one before it ended without a final status. */
  attemptStarted(rollout: Rollout): void {
    if (rollout.attempts > 1) this.emitRoot(rollout.id, rollout.attempts - 1, 'retried');
  }

  /**
   * An event was appended: a tool span becomes a child span (of the request's `traceparent`, else
   * of the rollout's root). `receivedAt`: when its request arrived; an event recorded before it is
   * a repeated report, whose span went out already.
   */
  eventRecorded(event: RolloutEvent, headers: IncomingHttpHeaders, receivedAt: number): void {
    if (event.type !== 'span' || Date.parse(event.at) < receivedAt) return;
    try {
      this.toolSpan(event, headers);
    } catch (err) {
      this.deps.log.warn({ err, rolloutId: event.rolloutId }, 'tracing: could not record the tool span');
    }
  }

  /**
   * Ends what is in flight (root spans being assembled) and exports what is queued, waiting at most
   * the export timeout: a trace backend that is down does not hold the gateway's shutdown.
   */
  async close(): Promise<void> {
    await Promise.all([...this.pending]);
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.options.exportTimeoutMs);
    });
    // A failed export is counted (and logged) by the queue already.
    await Promise.race([this.provider.shutdown().catch(() => undefined), gaveUp]);
    clearTimeout(timer);
    const lost = this.queue.abandon();
    if (lost > 0) this.deps.log.warn({ dropped: lost }, 'tracing: spans still unexported at shutdown were dropped');
  }

  private startCall(call: CallSpanStart): CallSpan {
    const parent = this.parentOf(call.headers, call.rolloutId, call.attempt);
    const attributes: Attributes = {
      ...requestAttributes(call.endpoint, call.request),
      'rein.rollout.id': call.rolloutId,
      'rein.rollout.attempt': call.attempt,
      'rein.call.id': call.callId,
      'rein.call.endpoint': call.endpoint,
      'rein.policy.version': call.policyVersion,
    };
    if (call.route) {
      const backend = new URL(call.route.endpoint);
      Object.assign(attributes, {
        'rein.backend': call.route.backendName,
        'rein.backend.model': call.route.model,
        [ATTR_SERVER_ADDRESS]: backend.hostname,
        [ATTR_SERVER_PORT]: Number(backend.port || (backend.protocol === 'https:' ? 443 : 80)),
      });
    }
    if (this.options.content) {
      const input = inputMessages(call.endpoint, call.request);
      if (input !== undefined) attributes['gen_ai.input.messages'] = input;
    }
    const span = this.tracer.startSpan(
      callSpanName(call.endpoint, call.request.model),
      { kind: SpanKind.CLIENT, startTime: new Date(call.startedAt), attributes },
      parent,
    );
    let ended = false;
    return {
      forwardedHeaders: (headers) => {
        const out: Record<string, string | string[] | undefined> = { ...headers };
        delete out.traceparent;
        delete out.tracestate;
        this.propagator.inject(trace.setSpan(ROOT_CONTEXT, span), out, defaultTextMapSetter);
        return out as IncomingHttpHeaders;
      },
      end: (result, latencyMs) => {
        if (ended) return;
        ended = true;
        try {
          this.endCall(span, call, result, latencyMs);
        } catch (err) {
          this.deps.log.warn({ err, callId: call.callId }, 'tracing: could not end the call span');
        }
      },
    };
  }

  private endCall(span: Span, call: CallSpanStart, result: Partial<CallFinish>, latencyMs: number): void {
    span.setAttributes(
      responseAttributes(call.endpoint, {
        response: result.response,
        usage: result.usage ?? null,
        choices: result.choices ?? [],
      }),
    );
    span.setAttribute('rein.call.latency_ms', latencyMs);
    if (result.ttftMs !== undefined && result.ttftMs !== null) {
      span.setAttribute('rein.call.ttft_ms', result.ttftMs);
      if (call.request.stream === true) span.setAttribute('gen_ai.response.time_to_first_chunk', result.ttftMs / 1000);
    }
    if (result.upstreamStatus !== undefined && result.upstreamStatus !== null)
      span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, result.upstreamStatus);
    const errorClass = result.errorClass ?? null;
    span.setAttribute('rein.call.status', errorClass === null ? 'ok' : 'error');
    if (errorClass !== null) {
      span.setAttributes({ 'rein.call.error_class': errorClass, [ATTR_ERROR_TYPE]: errorClass });
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: redact(result.errorMessage ?? errorClass, this.deps.redaction),
      });
    }
    if (this.options.content && result.response !== undefined) {
      // Redacted here too: the proxy hands the outcome over before the journal (which redacts it) has it.
      const output = outputMessages(call.endpoint, redact(result.response, this.deps.redaction));
      if (output !== undefined) span.setAttribute('gen_ai.output.messages', output);
    }
    span.end(new Date(call.startedAt + latencyMs));
  }

  private toolSpan(event: RolloutEvent, headers: IncomingHttpHeaders): void {
    const p = event.payload as {
      actionId: string;
      name: string;
      kind?: string;
      latencyMs?: number;
      permission?: string;
      failure?: string;
      irreversible?: boolean;
      input?: unknown;
      output?: unknown;
    };
    const endAt = Date.parse(event.at);
    const attributes: Attributes = {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': p.name,
      'gen_ai.tool.call.id': p.actionId,
      'rein.rollout.id': event.rolloutId,
      'rein.rollout.attempt': event.attempt,
      'rein.tool.kind': p.kind ?? 'tool',
      'rein.tool.permission': p.permission ?? 'not_applicable',
      'rein.tool.reported_by': event.source === 'rollout' ? 'harness' : event.source,
    };
    if (p.latencyMs !== undefined) attributes['rein.tool.latency_ms'] = p.latencyMs;
    if (p.irreversible !== undefined) attributes['rein.tool.irreversible'] = p.irreversible;
    if (p.failure !== undefined)
      Object.assign(attributes, { 'rein.tool.failure': p.failure, [ATTR_ERROR_TYPE]: p.failure });
    if (this.options.content) {
      // Events are stored redacted (the gateway's RedactingStore): this is the stored text.
      if (p.input !== undefined) attributes['gen_ai.tool.call.arguments'] = JSON.stringify(p.input);
      if (p.output !== undefined) attributes['gen_ai.tool.call.result'] = JSON.stringify(p.output);
    }
    const parent = this.parentOf(headers, event.rolloutId, event.attempt);
    const span = this.ids.with({ spanId: toolSpanId(event.rolloutId, event.attempt, p.actionId) }, () =>
      this.tracer.startSpan(
        `execute_tool ${p.name}`,
        { kind: SpanKind.INTERNAL, startTime: new Date(endAt - (p.latencyMs ?? 0)), attributes },
        parent,
      ),
    );
    if (p.failure !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: p.failure });
    span.end(new Date(endAt));
  }

  /** The parent a request's span gets: the `traceparent` it carries, else the rollout attempt's root span. */
  private parentOf(headers: IncomingHttpHeaders, rolloutId: string, attempt: number): Context {
    const sent = this.propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
    if (trace.getSpanContext(sent)) return sent;
    const { traceId, rootSpanId } = rolloutTraceIds(rolloutId, attempt);
    return trace.setSpanContext(ROOT_CONTEXT, {
      traceId,
      spanId: rootSpanId,
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    });
  }

  private emitRoot(rolloutId: string, attempt: number, outcome: AttemptOutcome): void {
    const work = this.rootSpan(rolloutId, attempt, outcome)
      .catch((err: unknown) =>
        this.deps.log.warn({ err, rolloutId, attempt }, 'tracing: could not record the rollout span'),
      )
      .finally(() => this.pending.delete(work));
    this.pending.add(work);
  }

  /** The attempt's root span, from what the store holds (whichever gateway recorded it). */
  private async rootSpan(rolloutId: string, attempt: number, outcome: AttemptOutcome): Promise<void> {
    const recorded = await readAttempt(this.deps.store, rolloutId, attempt, outcome);
    if (!recorded) return;
    const { rollout, events, startAt, endAt } = recorded;
    const { traceId, rootSpanId } = rolloutTraceIds(rolloutId, attempt);
    const span = this.ids.with({ traceId, spanId: rootSpanId }, () =>
      this.tracer.startSpan('rein.rollout', {
        kind: SpanKind.INTERNAL,
        root: true,
        startTime: new Date(startAt),
        attributes: rolloutSpanAttributes(recorded, attempt, outcome),
      }),
    );
    for (const event of events) {
      const marked = spanEventOf(event);
      if (marked) span.addEvent(marked.name, marked.attributes, new Date(event.at));
    }
    const status = rolloutSpanStatus(rollout, attempt, outcome);
    if (status) span.setStatus(status);
    span.end(new Date(Math.max(endAt, startAt)));
  }
}
