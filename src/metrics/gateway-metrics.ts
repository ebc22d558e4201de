import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { CallEndpoint, CallErrorClass } from '../store/trace-store.js';
import { CALL_SECONDS_BUCKETS, serverRegistry, WRITE_SECONDS_BUCKETS } from './registry.js';

/** The series one kind of finished call moves: looked up once, so a call costs no label hashing. */
interface CallSeries {
  calls: Counter.Internal;
  seconds: Histogram.Internal<'endpoint' | 'status'>;
  ttft: Histogram.Internal<'endpoint'>;
  promptTokens: Counter.Internal;
  completionTokens: Counter.Internal;
}

/**
 * The gateway's Prometheus metrics: every journaled model call by endpoint, outcome and error
 * class, its latency and time to first token, the calls in flight, how long journal writes take,
 * and the tokens the backend reported.
 */
export class GatewayMetrics {
  readonly registry: Registry = serverRegistry();
  private readonly calls = new Counter({
    name: 'rein_gateway_calls_total',
    help: 'Model calls journaled by the gateway, by endpoint, status (ok or error) and error class (empty when ok)',
    labelNames: ['endpoint', 'status', 'error_class'] as const,
    registers: [this.registry],
  });
  private readonly seconds = new Histogram({
    name: 'rein_gateway_call_duration_seconds',
    help: 'Time from a model call reaching the gateway to its journal entry being complete (the last byte follows)',
    labelNames: ['endpoint', 'status'] as const,
    buckets: CALL_SECONDS_BUCKETS,
    registers: [this.registry],
  });
  private readonly ttft = new Histogram({
    name: 'rein_gateway_time_to_first_token_seconds',
    help: "Time from a model call reaching the gateway to the backend's first bytes (streamed: the first event relayed)",
    labelNames: ['endpoint'] as const,
    buckets: CALL_SECONDS_BUCKETS,
    registers: [this.registry],
  });
  private readonly inFlight = new Gauge({
    name: 'rein_gateway_calls_in_flight',
    help: 'Model calls journaled and not yet finished',
    registers: [this.registry],
  });
  private readonly journalWrites = new Histogram({
    name: 'rein_gateway_journal_write_seconds',
    help: 'Time a journal write takes to commit: begin (before the call is forwarded) and finish (before its last byte reaches the harness)',
    labelNames: ['operation'] as const,
    buckets: WRITE_SECONDS_BUCKETS,
    registers: [this.registry],
  });
  private readonly promptTokens = new Counter({
    name: 'rein_gateway_prompt_tokens_total',
    help: 'Prompt tokens of finished model calls, as the backend reported them (or counted from its token ids)',
    labelNames: ['endpoint'] as const,
    registers: [this.registry],
  });
  private readonly completionTokens = new Counter({
    name: 'rein_gateway_completion_tokens_total',
    help: 'Completion tokens of finished model calls, as the backend reported them (or counted from its token ids)',
    labelNames: ['endpoint'] as const,
    registers: [this.registry],
  });
  private readonly beginWrites = this.journalWrites.labels('begin');
  private readonly finishWrites = this.journalWrites.labels('finish');
  private readonly series = new Map<string, CallSeries>();

  /** A call is journaled and about to be forwarded. */
  callStarted(): void {
    this.inFlight.inc();
  }

  /** A call that callStarted counted is over, however it ended. */
  callEnded(): void {
    this.inFlight.dec();
  }

  /** A call's journal entry is complete (with its outcome). */
  callFinished(
    endpoint: CallEndpoint,
    errorClass: CallErrorClass | null,
    latencyMs: number,
    ttftMs: number | null,
    usage: unknown,
  ): void {
    const s = this.seriesOf(endpoint, errorClass);
    s.calls.inc();
    s.seconds.observe(latencyMs / 1000);
    if (ttftMs !== null) s.ttft.observe(ttftMs / 1000);
    const tokens = tokensOf(usage);
    if (tokens.prompt > 0) s.promptTokens.inc(tokens.prompt);
    if (tokens.completion > 0) s.completionTokens.inc(tokens.completion);
  }

  journalWrite(operation: 'begin' | 'finish', ms: number): void {
    (operation === 'begin' ? this.beginWrites : this.finishWrites).observe(ms / 1000);
  }

  private seriesOf(endpoint: CallEndpoint, errorClass: CallErrorClass | null): CallSeries {
    const key = errorClass === null ? endpoint : `${endpoint} ${errorClass}`;
    let s = this.series.get(key);
    if (!s) {
      const status = errorClass === null ? 'ok' : 'error';
      s = {
        calls: this.calls.labels(endpoint, status, errorClass ?? ''),
        seconds: this.seconds.labels(endpoint, status),
        ttft: this.ttft.labels(endpoint),
        promptTokens: this.promptTokens.labels(endpoint),
        completionTokens: this.completionTokens.labels(endpoint),
      };
      this.series.set(key, s);
    }
    return s;
  }
}

/** Prompt and completion tokens of a usage object: chat and completions name them one way, responses another. */
function tokensOf(usage: unknown): { prompt: number; completion: number } {
  if (usage === null || typeof usage !== 'object') return { prompt: 0, completion: 0 };
  const u = usage as Record<string, unknown>;
  const count = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0);
  return {
    prompt: count(u.prompt_tokens ?? u.input_tokens),
    completion: count(u.completion_tokens ?? u.output_tokens),
  };
}
