import type { GatewayControlClient } from '../gateway/control-client.js';
import type { RolloutOutcome } from './rollout-batch.js';
import { recordedRewards } from './rewards.js';
import type { FailureClass, Rollout, RolloutEvent } from './rollout.js';

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

/** Ends a scored attempt from its reward event: succeeded, or failed with the policy's failure the event carries. */
export async function finishScored(
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
  const reward = events.filter((e) => e.type === 'reward' && e.source === 'admin').at(-1)?.payload;
  const { reported, disagrees } = recordedRewards(events);
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
