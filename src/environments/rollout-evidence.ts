import { recordedRewards } from '../rollouts/rewards.js';
import type { Rollout, RolloutEvent } from '../rollouts/rollout.js';
import { isGiveUp, typicalSolvedSteps, type RolloutEvidence } from './rigger-evidence.js';
import { ENVIRONMENT_EVENT } from './rollout-environment.js';
import type { SessionSummary } from './session.js';

/** A finished training rollout as the journal keeps it: the row and its events. */
export interface JournaledRollout {
  rollout: Pick<Rollout, 'id' | 'taskId' | 'attempts' | 'failureClass' | 'statusReason'>;
  events: readonly RolloutEvent[];
}

/**
 * What the rigger reads of an iteration's training rollouts, from the journal: each rollout's
 * verified reward and failure class, and what its final attempt did in the environment (the
 * `environment` event: steps, errors by tool, the variant). Give-ups are marked by isGiveUp, with
 * its inputs read as the journal allows:
 * - `answered`: the harness ended without a failure of its own (no failure class); a run that
 *   crashed, timed out, or ended on a failed tool call or a bad model reply gave no answer;
 * - `refused`: the failure class is `model` and its reason names a refusal (failure-class.ts
 *   words it so), not a reply cut at max tokens.
 * The typical solved steps are the task's median over the rollouts given (the iteration's).
 */
export function rolloutEvidence(
  rollouts: readonly JournaledRollout[],
  iteration: number,
  acceptReward: number,
): RolloutEvidence[] {
  const read = rollouts.map(({ rollout, events }) => {
    const attemptEvents = events.filter((e) => e.attempt === rollout.attempts);
    const reward = recordedRewards(events, rollout.attempts).verified ?? null;
    const summary = sessionSummaryOf(attemptEvents);
    return {
      rollout,
      reward,
      success: reward === null ? null : reward >= acceptReward,
      summary,
    };
  });
  const typical = typicalSolvedSteps(
    read.map((r) => ({ taskId: taskOf(r.rollout), success: r.success, steps: r.summary?.steps ?? null })),
  );
  return read.map(({ rollout, reward, success, summary }) => {
    const taskId = taskOf(rollout);
    const steps = summary?.steps ?? null;
    const failureClass = rollout.failureClass ?? null;
    const attempt = {
      success,
      failureClass,
      steps,
      toolErrors: summary?.errors ?? 0,
      answered: failureClass === null,
      refused: failureClass === 'model' && /refus/i.test(rollout.statusReason ?? ''),
    };
    return {
      taskId,
      iteration,
      variant: summary?.variant ?? null,
      reward,
      success,
      failureClass,
      steps,
      toolCalls: summary?.byTool ?? {},
      gaveUp: isGiveUp(attempt, typical.get(taskId) ?? null),
    };
  });
}

const taskOf = (rollout: JournaledRollout['rollout']): string => rollout.taskId ?? rollout.id;

/** The attempt's `environment` event (its last, should a retried write have left two), or null without one. */
function sessionSummaryOf(events: readonly RolloutEvent[]): SessionSummary | null {
  const event = events.filter((e) => e.type === 'custom' && e.payload.name === ENVIRONMENT_EVENT).at(-1);
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
