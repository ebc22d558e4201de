import { createHash } from 'node:crypto';

/**
 * The ids of a rollout attempt's trace, derived from the rollout id and attempt alone: every
 * gateway process (and the worker, and the console) names the same trace and root span without
 * asking anyone, so spans emitted by different processes at different times join one trace.
 */
export interface RolloutTraceIds {
  /** 32 hex digits. */
  traceId: string;
  /** The root span (the rollout attempt): 16 hex digits. */
  rootSpanId: string;
}

export function rolloutTraceIds(rolloutId: string, attempt: number): RolloutTraceIds {
  return {
    traceId: hexId(32, 'trace', rolloutId, String(attempt)),
    rootSpanId: hexId(16, 'rollout', rolloutId, String(attempt)),
  };
}

/** A tool span's id: stable per reported action, like the event it comes from (a retried report is the same span). */
export function toolSpanId(rolloutId: string, attempt: number, actionId: string): string {
  return hexId(16, 'tool', rolloutId, String(attempt), actionId);
}

/**
 * The W3C `traceparent` that makes a harness's own spans children of the rollout's root span:
 * handed to the harness as TRACEPARENT (the OpenTelemetry convention for a process's parent).
 */
export function rolloutTraceparent(rolloutId: string, attempt: number): string {
  const { traceId, rootSpanId } = rolloutTraceIds(rolloutId, attempt);
  return `00-${traceId}-${rootSpanId}-01`;
}

function hexId(length: number, kind: string, ...parts: string[]): string {
  const id = createHash('sha256')
    .update(['rein', kind, ...parts].join('\0'))
    .digest('hex')
    .slice(0, length);
  // An all-zero id is invalid in W3C trace context: as good as impossible from a hash, but never emit one.
  return /^0+$/.test(id) ? `${id.slice(0, -1)}1` : id;
}
