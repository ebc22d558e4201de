import { TraceFlags, type Context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type Span,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { Logger } from '../log/logger.js';

/** Spans by fate since the gateway started. */
export interface ExportStats {
  exported: number;
  /** Dropped: the queue was full, or the backend did not take their batch. */
  dropped: number;
  /** Waiting to be exported, or being exported now. */
  queued: number;
}

export interface ExportQueueOptions {
  /** Spans waiting (or being sent) at most; past it, new ones are dropped. */
  maxQueueSize: number;
  /** How long spans wait to be sent in one batch. */
  batchDelayMs: number;
  /** Longest one export may take; after it the batch counts as dropped. */
  exportTimeoutMs: number;
  log: Pick<Logger, 'warn' | 'info'>;
}

/**
 * OpenTelemetry's batch span processor with a bounded queue whose losses are counted and logged:
 * a model call never waits on the trace backend, and when the backend is down or slow its spans
 * are dropped (one warning when it starts failing, one line when it recovers), never retried
 * into memory without bound.
 */
export class CountedExportQueue implements SpanProcessor {
  private readonly batch: BatchSpanProcessor;
  private readonly counts: ExportStats = { exported: 0, dropped: 0, queued: 0 };
  private failing = false;
  private abandoned = false;

  constructor(
    exporter: SpanExporter,
    private readonly options: ExportQueueOptions,
  ) {
    // The batch processor's own queue never fills (this one admits no more than it holds), so every loss is counted
    // here.
    this.batch = new BatchSpanProcessor(
      new SettlingExporter(exporter, options.exportTimeoutMs, (count, result) => this.settled(count, result)),
      {
        maxQueueSize: options.maxQueueSize,
        maxExportBatchSize: Math.min(512, options.maxQueueSize),
        scheduledDelayMillis: options.batchDelayMs,
        // Past the exporter's own limit: the exporter reports the timeout itself.
        exportTimeoutMillis: options.exportTimeoutMs * 2,
      },
    );
  }

  stats(): ExportStats {
    return { ...this.counts };
  }

  onStart(_span: Span, _context: Context): void {}

  onEnd(span: ReadableSpan): void {
    // The batch processor skips unsampled spans; they never reach the exporter, so they are not counted.
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.counts.queued >= this.options.maxQueueSize) {
      this.dropped(1, `the export queue is full (${this.options.maxQueueSize} spans: gateway.tracing.maxQueueSize)`);
      return;
    }
    this.counts.queued++;
    this.batch.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.batch.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.batch.shutdown();
  }

  /** Gives up on what is still queued or being sent (at shutdown): it counts as dropped. Returns how many. */
  abandon(): number {
    const lost = this.counts.queued;
    this.abandoned = true;
    this.counts.dropped += lost;
    this.counts.queued = 0;
    return lost;
  }

  private settled(count: number, result: ExportResult): void {
    // Counted already, when it was abandoned.
    if (this.abandoned) return;
    this.counts.queued -= count;
    if (result.code !== ExportResultCode.SUCCESS) {
      this.dropped(count, result.error?.message ?? 'the backend refused the batch');
      return;
    }
    this.counts.exported += count;
    if (this.failing) {
      this.failing = false;
      this.options.log.info({ dropped: this.counts.dropped }, 'trace export works again');
    }
  }

  private dropped(count: number, reason: string): void {
    this.counts.dropped += count;
    if (this.failing) return;
    this.failing = true;
    this.options.log.warn(
      { reason, dropped: this.counts.dropped },
      'trace export is failing: spans are dropped until it works again (model calls are not affected)',
    );
  }
}

/** Reports each batch's outcome exactly once, and as failed if the exporter never answers in time. */
class SettlingExporter implements SpanExporter {
  constructor(
    private readonly exporter: SpanExporter,
    private readonly timeoutMs: number,
    private readonly onSettled: (count: number, result: ExportResult) => void,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    let settled = false;
    const settle = (result: ExportResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      this.onSettled(spans.length, result);
      done(result);
    };
    // An exporter that never calls back would otherwise hold its spans in the count for ever.
    const timer = setTimeout(
      () =>
        settle({ code: ExportResultCode.FAILED, error: new Error(`the export took longer than ${this.timeoutMs} ms`) }),
      this.timeoutMs + 1000,
    );
    timer.unref();
    try {
      this.exporter.export(spans, settle);
    } catch (err) {
      settle({ code: ExportResultCode.FAILED, error: err as Error });
    }
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush?.() ?? Promise.resolve();
  }
}
