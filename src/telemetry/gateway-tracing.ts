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
  /** The headers for the backend: the harness's, with this span as the parent (`traceparent`) of what the backend traces. */
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

  private emitRoot(rolloutId: string, attempt: number, outcome: 'finished' | 'retried'): void {
    const work = this.rootSpan(rolloutId, attempt, outcome)
      .catch((err: unknown) =>
        this.deps.log.warn({ err, rolloutId, attempt }, 'tracing: could not record the rollout span'),
      )
      .finally(() => this.pending.delete(work));
    this.pending.add(work);
  }

  /** The attempt's root span, from what the store holds (whichever gateway recorded it). */
  private async rootSpan(rolloutId: string, attempt: number, outcome: 'finished' | 'retried'): Promise<void> {
    const { store } = this.deps;
    const rollout = await store.getRollout(rolloutId);
    if (!rollout) return;
    const events = (await store.listEvents(rolloutId)).filter((e) => e.attempt === attempt);
    const times = events.map((e) => Date.parse(e.at));
    const lastStatus = events.filter((e) => e.type === 'status').at(-1);
    const endAt = outcome === 'finished' && lastStatus ? Date.parse(lastStatus.at) : Date.now();
    // An attempt after the first starts at its first record (its calls are not in the events).
    const startAt =
      attempt === 1
        ? Date.parse(rollout.createdAt)
        : Math.min(endAt, ...times, ...(await store.listCalls(rolloutId, attempt)).map((c) => c.startedAt));

    const verified = events.filter((e) => e.type === 'reward' && e.source === 'admin').at(-1);
    const reported = events.filter((e) => e.type === 'reward' && e.source === 'rollout').at(-1);
    const metadata = rollout.metadata;
    const attributes: Attributes = {
      'rein.rollout.id': rollout.id,
      'rein.rollout.attempt': attempt,
      'rein.rollout.mode': rollout.mode,
      'rein.rollout.status': outcome === 'retried' ? 'retried' : rollout.status,
      ...(rollout.taskId !== null && { 'rein.task.id': rollout.taskId }),
      ...(rollout.policyVersion !== null && { 'rein.policy.version': rollout.policyVersion }),
      ...(outcome === 'finished' &&
        rollout.failureClass !== null && {
          'rein.rollout.failure_class': rollout.failureClass,
          [ATTR_ERROR_TYPE]: rollout.failureClass,
        }),
      ...(outcome === 'finished' &&
        rollout.statusReason !== null && { 'rein.rollout.status_reason': rollout.statusReason }),
      ...(typeof metadata.batchId === 'string' && { 'rein.batch.id': metadata.batchId }),
      ...(typeof metadata.harnessVersion === 'string' && { 'rein.harness.version': metadata.harnessVersion }),
      ...(typeof verified?.payload.value === 'number' && { 'rein.reward': verified.payload.value }),
      ...(typeof reported?.payload.value === 'number' && { 'rein.reward.harness_reported': reported.payload.value }),
    };
    const { traceId, rootSpanId } = rolloutTraceIds(rolloutId, attempt);
    const span = this.ids.with({ traceId, spanId: rootSpanId }, () =>
      this.tracer.startSpan('rein.rollout', {
        kind: SpanKind.INTERNAL,
        root: true,
        startTime: new Date(startAt),
        attributes,
      }),
    );
    for (const event of events) {
      const marked = spanEventOf(event);
      if (marked) span.addEvent(marked.name, marked.attributes, new Date(event.at));
    }
    if (outcome === 'retried')
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: `attempt ${attempt} was lost; attempt ${attempt + 1} runs the rollout again`,
      });
    else if (rollout.status === 'failed')
      span.setStatus({ code: SpanStatusCode.ERROR, message: rollout.statusReason ?? rollout.failureClass ?? 'failed' });
    else if (rollout.status === 'succeeded') span.setStatus({ code: SpanStatusCode.OK });
    span.end(new Date(Math.max(endAt, startAt)));
  }
}

/** A rollout event as an event of the root span: rewards, status changes, interventions, custom events (tool spans are spans). */
function spanEventOf(event: RolloutEvent): { name: string; attributes: Attributes } | undefined {
  const p = event.payload;
  const source = event.source === 'admin' ? 'control_plane' : event.source === 'rollout' ? 'harness' : event.source;
  switch (event.type) {
    case 'reward': {
      // The verifier's reward comes through the control plane (admin key); a harness may report its own, never trained on.
      const components = (p.components ?? {}) as Record<string, number>;
      return {
        name: 'rein.reward',
        attributes: {
          'rein.reward.value': p.value as number,
          'rein.reward.source': event.source === 'admin' ? 'verifier' : 'harness',
          'gen_ai.evaluation.name': 'rein.reward',
          'gen_ai.evaluation.score.value': p.value as number,
          ...Object.fromEntries(
            Object.entries(components).map(([name, value]) => [`rein.reward.component.${name}`, value]),
          ),
        },
      };
    }
    case 'status':
      return {
        name: 'rein.status',
        attributes: {
          'rein.status.from': String(p.from),
          'rein.status.to': String(p.to),
          'rein.status.source': source,
          ...(typeof p.reason === 'string' && { 'rein.status.reason': p.reason }),
          ...(typeof p.failureClass === 'string' && { 'rein.status.failure_class': p.failureClass }),
        },
      };
    case 'intervention':
      return {
        name: 'rein.intervention',
        attributes: {
          'rein.intervention.reason': String(p.reason),
          ...(typeof p.by === 'string' && { 'rein.intervention.by': p.by }),
        },
      };
    case 'custom':
      return {
        name: `rein.event ${String(p.name)}`,
        attributes: { 'rein.event.name': String(p.name), 'rein.event.source': source },
      };
    default:
      return undefined;
  }
}
