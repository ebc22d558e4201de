import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * A registry of its own for one Rein server (gateway, policy server, worker): several servers in
 * one process (`rein dev`, the tests) each count for themselves, and none sees another's metrics.
 */
export function serverRegistry(): Registry {
  return new Registry();
}

let processMetrics: Registry | undefined;

/**
 * Node's process metrics (CPU, memory, event loop lag, GC), collected once per process: each
 * collection keeps an event loop monitor and a GC observer for good, so one per server would
 * add up in a process that starts many.
 */
function processRegistry(): Registry {
  if (!processMetrics) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics });
  }
  return processMetrics;
}

/**
 * A server's metrics and its process's, in Prometheus's text exposition format, with the content type to send them as.
 */
export async function exposition(registry: Registry): Promise<{ contentType: string; text: string }> {
  const [own, processWide] = await Promise.all([registry.metrics(), processRegistry().metrics()]);
  return { contentType: registry.contentType, text: `${own}${processWide}` };
}

/** Buckets (seconds) for model calls: from a cached reply to a long agentic generation. */
export const CALL_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** Buckets (seconds) for a journal write: SQLite in WAL mode commits in well under a millisecond to tens of them. */
export const WRITE_SECONDS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/** Buckets (seconds) for a worker's stages: a gate lookup to an hours-long rollout set or training job. */
export const STAGE_SECONDS_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400];
