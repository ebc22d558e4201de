import { RandomIdGenerator, type IdGenerator } from '@opentelemetry/sdk-trace-base';

/**
 * Random ids, except for a span started inside `with`: it gets the ids given. Rein's own spans
 * whose ids are derived (a rollout's root span, a tool span) are started that way, so the SDK
 * stays the one place spans are made.
 */
export class ChosenIds implements IdGenerator {
  private readonly random = new RandomIdGenerator();
  private chosen: { traceId?: string | undefined; spanId?: string | undefined } | undefined;

  /** Runs `start` (which must start exactly one span, synchronously) with the ids given. */
  with<T>(ids: { traceId?: string; spanId: string }, start: () => T): T {
    this.chosen = { ...ids };
    try {
      return start();
    } finally {
      this.chosen = undefined;
    }
  }

  generateTraceId(): string {
    const id = this.chosen?.traceId;
    if (id === undefined) return this.random.generateTraceId();
    this.chosen!.traceId = undefined;
    return id;
  }

  generateSpanId(): string {
    const id = this.chosen?.spanId;
    if (id === undefined) return this.random.generateSpanId();
    this.chosen!.spanId = undefined;
    return id;
  }
}
