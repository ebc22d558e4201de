import { recordedRewards } from '../rollouts/rewards.js';
import {
  isFinished,
  type FailureClass,
  type Rollout,
  type RolloutEvent,
  type RolloutStatus,
} from '../rollouts/rollout.js';
import type { CallRecord, TraceStore } from '../store/trace-store.js';

/**
 * What the gate and the ledgers need to know about one finished rollout, read from the trace
 * store: its outcome, what it cost and what went wrong on the way.
 */
export interface RolloutFacts {
  rolloutId: string;
  taskId: string;
  /** The sample index within its task (pairs the candidate's k-th sample with the incumbent's). */
  sample: number;
  policyVersion: string | null;
  status: RolloutStatus;
  /** The verifier's reward; null when the rollout failed before it was scored. */
  reward: number | null;
  failureClass: FailureClass | null;
  /** Prompt + completion tokens over the rollout's calls (all attempts). */
  tokens: number;
  /** Model calls the harness made (all attempts). */
  steps: number;
  /** Wall time of the last attempt's model calls, first call start to last call end (ms). */
  latencyMs: number;
  attempts: number;
  /** Spans the harness reported as failed. */
  toolErrors: number;
  /** Human-intervention events the harness posted. */
  interventions: number;
  /** The harness reported a reward the verifier did not give. */
  rewardDisagrees: boolean;
}

/**
 * Reads the facts of finished rollouts; a rollout that is missing or still running is an error (the
 * replay is not done). One rollout at a time, awaiting `beforeEach` first: a hook for the caller,
 * e.g. a turn for an activity's heartbeat timer between the store's synchronous reads.
 */
export async function readRolloutFacts(
  store: TraceStore,
  rolloutIds: readonly string[],
  beforeEach?: () => Promise<void>,
): Promise<RolloutFacts[]> {
  const facts: RolloutFacts[] = [];
  for (const id of rolloutIds) {
    await beforeEach?.();
    const rollout = await store.getRollout(id);
    if (!rollout) throw new Error(`rollout ${id} is not in the trace store; was the replay run against this store?`);
    if (!isFinished(rollout.status))
      throw new Error(`rollout ${id} is still ${rollout.status}; facts are read from finished rollouts`);
    const [calls, events] = await Promise.all([store.listCalls(id), store.listEvents(id)]);
    facts.push(rolloutFactsOf(rollout, calls, events));
  }
  return facts;
}

export function rolloutFactsOf(
  rollout: Rollout,
  calls: readonly CallRecord[],
  events: readonly RolloutEvent[],
): RolloutFacts {
  const rewards = recordedRewards(events);
  const lastAttempt = calls.filter((c) => c.attempt === rollout.attempts);
  const start = Math.min(...lastAttempt.map((c) => c.startedAt));
  const end = Math.max(...lastAttempt.map((c) => c.startedAt + (c.latencyMs ?? 0)));
  return {
    rolloutId: rollout.id,
    taskId: rollout.taskId ?? rollout.id,
    sample: typeof rollout.metadata.sample === 'number' ? rollout.metadata.sample : 0,
    policyVersion: rollout.policyVersion ?? calls.at(-1)?.policyVersion ?? null,
    status: rollout.status,
    reward: rewards.verified ?? null,
    failureClass: rollout.failureClass,
    tokens: calls.reduce((sum, c) => sum + tokensOf(c.usage), 0),
    steps: calls.length,
    latencyMs: lastAttempt.length === 0 ? 0 : end - start,
    attempts: rollout.attempts,
    toolErrors: events.filter((e) => e.type === 'span' && e.payload.failure !== undefined).length,
    interventions: events.filter((e) => e.type === 'intervention').length,
    rewardDisagrees: rewards.disagrees,
  };
}

function tokensOf(usage: unknown): number {
  const u = (usage ?? {}) as {
    total_tokens?: unknown;
    prompt_tokens?: unknown;
    completion_tokens?: unknown;
    input_tokens?: unknown;
    output_tokens?: unknown;
  };
  if (typeof u.total_tokens === 'number') return u.total_tokens;
  const parts = [u.prompt_tokens, u.completion_tokens, u.input_tokens, u.output_tokens];
  return parts.reduce<number>((sum, p) => sum + (typeof p === 'number' ? p : 0), 0);
}
