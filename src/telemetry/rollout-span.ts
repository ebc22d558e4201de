import { SpanStatusCode, type Attributes, type SpanStatus } from '@opentelemetry/api';
import { ATTR_ERROR_TYPE } from '@opentelemetry/semantic-conventions';
import type { Rollout, RolloutEvent } from '../rollouts/rollout.js';
import type { TraceStore } from '../store/trace-store.js';

/** How an attempt's trace ends: with the rollout's final status, or lost to a retry. */
export type AttemptOutcome = 'finished' | 'retried';

/** A rollout attempt as the store holds it, whichever gateway recorded it: what its root span is made of. */
export interface RecordedAttempt {
  rollout: Rollout;
  /** The attempt's events, in order. */
  events: RolloutEvent[];
  startAt: number;
  endAt: number;
}

export async function readAttempt(
  store: TraceStore,
  rolloutId: string,
  attempt: number,
  outcome: AttemptOutcome,
): Promise<RecordedAttempt | undefined> {
  const rollout = await store.getRollout(rolloutId);
  if (!rollout) return undefined;
  const events = (await store.listEvents(rolloutId)).filter((e) => e.attempt === attempt);
  const times = events.map((e) => Date.parse(e.at));
  const lastStatus = events.filter((e) => e.type === 'status').at(-1);
  const endAt = outcome === 'finished' && lastStatus ? Date.parse(lastStatus.at) : Date.now();
  // An attempt after the first starts at its first record (its calls are not in the events).
  const startAt =
    attempt === 1
      ? Date.parse(rollout.createdAt)
      : Math.min(endAt, ...times, ...(await store.listCalls(rolloutId, attempt)).map((c) => c.startedAt));
  return { rollout, events, startAt, endAt };
}

/** The root span's attributes: the rollout, its outcome, and the verifier's (and the harness's own) reward. */
export function rolloutSpanAttributes(
  { rollout, events }: RecordedAttempt,
  attempt: number,
  outcome: AttemptOutcome,
): Attributes {
  const verified = events.filter((e) => e.type === 'reward' && e.source === 'admin').at(-1);
  const reported = events.filter((e) => e.type === 'reward' && e.source === 'rollout').at(-1);
  const metadata = rollout.metadata;
  return {
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
}

/** The root span's status; none while the rollout is neither failed nor succeeded. */
export function rolloutSpanStatus(rollout: Rollout, attempt: number, outcome: AttemptOutcome): SpanStatus | undefined {
  if (outcome === 'retried')
    return {
      code: SpanStatusCode.ERROR,
      message: `attempt ${attempt} was lost; attempt ${attempt + 1} runs the rollout again`,
    };
  if (rollout.status === 'failed')
    return { code: SpanStatusCode.ERROR, message: rollout.statusReason ?? rollout.failureClass ?? 'failed' };
  if (rollout.status === 'succeeded') return { code: SpanStatusCode.OK };
  return undefined;
}

/**
 * A rollout event as an event of the root span: rewards, status changes, interventions, custom events (tool spans are
 * spans).
 */
export function spanEventOf(event: RolloutEvent): { name: string; attributes: Attributes } | undefined {
  const p = event.payload;
  const source = event.source === 'admin' ? 'control_plane' : event.source === 'rollout' ? 'harness' : event.source;
  switch (event.type) {
    case 'reward': {
      // The verifier's reward comes through the control plane (admin key); a harness may report its own, never trained
      // on.
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
