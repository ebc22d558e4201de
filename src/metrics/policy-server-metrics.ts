import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { CALL_SECONDS_BUCKETS, serverRegistry } from './registry.js';

/**
 * The embedded policy server's Prometheus metrics: requests by route and status code, the rows
 * (choices) queued or generating, and the tokens read and generated. Tokens per second is
 * `rate(rein_policy_server_generated_tokens_total[1m])`.
 */
export class PolicyServerMetrics {
  readonly registry: Registry = serverRegistry();
  private readonly requests = new Counter({
    name: 'rein_policy_server_requests_total',
    help: 'HTTP requests answered, by route (empty for no route) and status code',
    labelNames: ['route', 'code'] as const,
    registers: [this.registry],
  });
  private readonly queued = new Gauge({
    name: 'rein_policy_server_queue_depth',
    help: 'Rows (one per choice of a request) waiting for the scheduler or generating',
    registers: [this.registry],
  });
  private readonly promptTokens = new Counter({
    name: 'rein_policy_server_prompt_tokens_total',
    help: 'Prompt tokens of generated rows (a prompt counts once per choice: each row prefills it)',
    registers: [this.registry],
  });
  private readonly generatedTokens = new Counter({
    name: 'rein_policy_server_generated_tokens_total',
    help: 'Tokens generated; rate() of it is the tokens per second',
    registers: [this.registry],
  });
  private readonly rowSeconds = new Histogram({
    name: 'rein_policy_server_row_duration_seconds',
    help: 'Time from a row being queued to its last token',
    buckets: CALL_SECONDS_BUCKETS,
    registers: [this.registry],
  });

  answered(route: string, code: number): void {
    this.requests.labels(route, String(code)).inc();
  }

  /** Follows one row from the queue to its end; the row's promise is returned as it was. */
  row<T extends { ids: readonly number[] }>(promptTokens: number, generating: Promise<T>): Promise<T> {
    this.queued.inc();
    const t0 = performance.now();
    void generating.then(
      (state) => {
        this.queued.dec();
        this.promptTokens.inc(promptTokens);
        this.generatedTokens.inc(state.ids.length);
        this.rowSeconds.observe((performance.now() - t0) / 1000);
      },
      () => this.queued.dec(),
    );
    return generating;
  }
}
