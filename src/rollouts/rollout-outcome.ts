import { GatewayRequestError, type GatewayControlClient } from '../gateway/control-client.js';
import type { RolloutOutcome } from './rollout-batch.js';
import { recordedRewards, verifiedRewardEvent } from './rewards.js';
import { isFinished, isUnscored, type FailureClass, type Rollout, type RolloutEvent } from './rollout.js';

/** Which rollout an outcome is of. */
export interface OutcomeBase {
  rolloutId: string;
  taskId: string;
  sample: number;
}

/** An outcome's fields when its rollout was not scored. */
export function unscoredFields(base: OutcomeBase, attempts: number) {
  return { ...base, components: {}, harnessReportedReward: null, rewardDisagrees: false, attempts };
}

/**
 * Ends a scored attempt from its reward event (the one the store keeps for the attempt): succeeded, or failed with the
 * policy's failure the event carries. Another runner that scored the same attempt (the store gave it the same event)
 * and finished it first is no error: the outcome is the one it recorded.
 */
export async function finishScored(
  gateway: GatewayControlClient,
  base: OutcomeBase,
  attempt: number,
  event: RolloutEvent,
): Promise<RolloutOutcome> {
  try {
    return await finishFromEvent(gateway, base, attempt, event);
  } catch (err) {
    const finished = await finishedElsewhere(gateway, base.rolloutId, attempt, err);
    return outcomeOf(base, finished, await gateway.listEvents(base.rolloutId));
  }
}

/** The rollout as another runner finished and scored it in `attempt`, if that is why its status write was refused. */
async function finishedElsewhere(
  gateway: GatewayControlClient,
  rolloutId: string,
  attempt: number,
  refused: unknown,
): Promise<Rollout> {
  if (!(refused instanceof GatewayRequestError) || refused.status !== 409) throw refused;
  const rollout = await gateway.getRollout(rolloutId);
  if (!isFinished(rollout.status) || isUnscored(rollout) || rollout.attempts !== attempt) throw refused;
  return rollout;
}

async function finishFromEvent(
  gateway: GatewayControlClient,
  base: OutcomeBase,
  attempt: number,
  event: RolloutEvent,
): Promise<RolloutOutcome> {
  const data = (event.payload.data ?? {}) as {
    harnessReported?: number;
    disagrees?: boolean;
    failure?: { failureClass: FailureClass; reason: string; evidence?: Record<string, unknown> };
  };
  const scored = {
    ...base,
    reward: event.payload.value as number,
    components: (event.payload.components as Record<string, number> | undefined) ?? {},
    harnessReportedReward: data.harnessReported ?? null,
    rewardDisagrees: data.disagrees ?? false,
    attempts: attempt,
  };
  if (data.failure) {
    await gateway.setStatus(base.rolloutId, { status: 'failed', ...data.failure, attempt });
    return { ...scored, status: 'failed', failureClass: data.failure.failureClass, reason: data.failure.reason };
  }
  await gateway.setStatus(base.rolloutId, { status: 'succeeded', reason: 'verified', attempt });
  return { ...scored, status: 'succeeded', failureClass: null, reason: null };
}

/** The outcome of a rollout a previous run of the batch finished and scored, as the journal has it. */
export function outcomeOf(base: OutcomeBase, rollout: Rollout, events: RolloutEvent[]): RolloutOutcome {
  const reward = verifiedRewardEvent(events, rollout.attempts)?.payload;
  const { reported, disagrees } = recordedRewards(events, rollout.attempts);
  return {
    ...base,
    status: rollout.status === 'succeeded' ? 'succeeded' : rollout.status === 'cancelled' ? 'cancelled' : 'failed',
    reward: typeof reward?.value === 'number' ? reward.value : null,
    components: (reward?.components as Record<string, number> | undefined) ?? {},
    harnessReportedReward: reported ?? null,
    rewardDisagrees: disagrees,
    failureClass: rollout.failureClass,
    reason: rollout.status === 'succeeded' ? null : rollout.statusReason,
    attempts: rollout.attempts,
  };
}
