import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * A registry of its own for one Rein server (gateway, policy server, worker), with Node's process
 * metrics (CPU, memory, event loop lag, GC) in it: several servers in one process (`rein dev`, the
 * tests) each answer for themselves, and none sees the metrics of another.
 */
export function serverRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** The registry in Prometheus's text exposition format, with the content type to send it as. */
export async function exposition(registry: Registry): Promise<{ contentType: string; text: string }> {
  return { contentType: registry.contentType, text: await registry.metrics() };
}

/** Buckets (seconds) for model calls: from a cached reply to a long agentic generation. */
export const CALL_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** Buckets (seconds) for a journal write: SQLite in WAL mode commits in well under a millisecond to tens of them. */
export const WRITE_SECONDS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/** Buckets (seconds) for a worker's stages: a gate lookup to an hours-long rollout set or training job. */
export const STAGE_SECONDS_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400];
