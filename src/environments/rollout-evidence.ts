import { refusalRegExps } from '../rollouts/failure-class.js';
import { recordedRewards } from '../rollouts/rewards.js';
import type { Rollout, RolloutEvent } from '../rollouts/rollout.js';
import type { CallRecord } from '../store/trace-store.js';
import { isGiveUp, typicalSolvedSteps, type EndedAttempt, type RolloutEvidence } from './rigger-evidence.js';
import { ENVIRONMENT_EVENT } from './rollout-environment.js';
import type { SessionSummary } from './session.js';

/** A finished rollout as the journal keeps it: the row, its events, and its final attempt's last model call. */
export interface JournaledRollout {
  rollout: Pick<Rollout, 'id' | 'taskId' | 'attempts' | 'failureClass' | 'statusReason'>;
  events: readonly RolloutEvent[];
  lastCall?: CallRecord;
}

/**
 * What the rigger reads of an iteration's training rollouts, from the journal: each rollout's
 * verified reward and failure class, and what its final attempt did in the environment (the
 * `environment` event: steps, errors by tool, the variant). Give-ups are marked by isGiveUp, with
 * its inputs read by endedAttempt. The typical solved steps are the task's median over the
 * rollouts given (the iteration's).
 */
export function rolloutEvidence(
  rollouts: readonly JournaledRollout[],
  iteration: number,
  acceptReward: number,
  refusalPatterns: readonly RegExp[] = refusalRegExps(),
): RolloutEvidence[] {
  const read = rollouts.map((journaled) => {
    const { rollout, events } = journaled;
    const reward = recordedRewards(events, rollout.attempts).verified ?? null;
    const success = reward === null ? null : reward >= acceptReward;
    return { rollout, reward, success, attempt: endedAttempt(journaled, success, refusalPatterns) };
  });
  const typical = typicalSolvedSteps(
    read.map((r) => ({ taskId: taskOf(r.rollout), success: r.success, steps: r.attempt.steps })),
  );
  return read.map(({ rollout, reward, success, attempt }) => {
    const taskId = taskOf(rollout);
    return {
      taskId,
      iteration,
      variant: attempt.session?.variant ?? null,
      reward,
      success,
      failureClass: attempt.failureClass,
      steps: attempt.steps,
      toolCalls: attempt.session?.byTool ?? {},
      gaveUp: isGiveUp(attempt, typical.get(taskId) ?? null),
    };
  });
}

const taskOf = (rollout: JournaledRollout['rollout']): string => rollout.taskId ?? rollout.id;

/**
 * What a finished rollout's final attempt showed, as isGiveUp reads it, from the journal:
 * - `steps` and `toolErrors` from its `environment` event (null steps without one);
 * - `answered`: its last model reply was text with no tool call (the agent gave its answer);
 * - `refused`: the runner classed its failure as a refusal (`model`, "refused"), or that last
 *   reply carries a `refusal` or matches the refusal patterns (rollouts.refusalPatterns).
 */
export function endedAttempt(
  journaled: JournaledRollout,
  success: boolean | null,
  refusalPatterns: readonly RegExp[] = refusalRegExps(),
): EndedAttempt & { session: SessionSummary | null } {
  const { rollout, events, lastCall } = journaled;
  const session = sessionSummaryOf(events, rollout.attempts);
  const reply = lastReply(lastCall);
  const refusedByRunner = rollout.failureClass === 'model' && /refused/.test(rollout.statusReason ?? '');
  return {
    success,
    failureClass: rollout.failureClass ?? null,
    steps: session?.steps ?? null,
    toolErrors: session?.errors ?? 0,
    answered: reply !== null && reply.toolCalls === 0 && reply.text.trim() !== '',
    refused: refusedByRunner || (reply !== null && (reply.refusal || refusalPatterns.some((p) => p.test(reply.text)))),
    session,
  };
}

/** The first choice of a chat completion's reply (what a harness reads); null when the call did not answer. */
function lastReply(call: CallRecord | undefined): { text: string; toolCalls: number; refusal: boolean } | null {
  if (!call || call.status !== 'ok') return null;
  const message = (call.response as { choices?: Array<{ message?: Record<string, unknown> }> } | null)?.choices?.[0]
    ?.message;
  if (!message) return null;
  return {
    text: typeof message.content === 'string' ? message.content : '',
    toolCalls: Array.isArray(message.tool_calls) ? message.tool_calls.length : 0,
    refusal: typeof message.refusal === 'string' && message.refusal !== '',
  };
}

/** The attempt's `environment` event (its last, should a retried write have left two), or null without one. */
export function sessionSummaryOf(events: readonly RolloutEvent[], attempt: number): SessionSummary | null {
  const event = events
    .filter((e) => e.attempt === attempt && e.type === 'custom' && e.payload.name === ENVIRONMENT_EVENT)
    .at(-1);
  const data = event?.payload.data as Partial<SessionSummary> | undefined;
  if (!data || typeof data.steps !== 'number') return null;
  return {
    environment: String(data.environment ?? ''),
    variant: typeof data.variant === 'string' ? data.variant : null,
    steps: data.steps,
    errors: typeof data.errors === 'number' ? data.errors : 0,
    byTool: data.byTool ?? {},
    done: data.done === true,
  };
}
