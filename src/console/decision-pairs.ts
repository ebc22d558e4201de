import type { GatewayControlClient } from '../gateway/control-client.js';
import type { StoredDecision } from '../registry/policy-registry.js';
import { recordedRewards } from '../rollouts/rewards.js';
import { rolloutIdFor } from '../rollouts/rollout-id.js';

/** One held-out task sample as both policies did it. */
export interface DecisionPair {
  taskId: string;
  sample: number;
  incumbent: PairSide;
  candidate: PairSide;
  /**
   * gained: the candidate is accepted where production was not; lost: the reverse; unscored: either side has no score
   * (not compared).
   */
  outcome: 'gained' | 'lost' | 'both' | 'neither' | 'unscored';
}

export interface PairSide {
  rolloutId: string;
  status: string | null;
  reward: number | null;
  failureClass: string | null;
}

/** One side's held-out replay, by reference: the decision keeps no rollout ids. */
export interface SetRef {
  version: string;
  batchId: string;
  taskIds: string[];
  samplesPerTask: number;
}

/** The decision's two replays (absent from decisions made without held-out tasks). */
export function decisionReplays(decision: StoredDecision): { candidate: SetRef; incumbent: SetRef } | null {
  const record = decision.record as { candidate?: SetRef; incumbent?: SetRef };
  if (!record.candidate?.batchId || !record.incumbent?.batchId) return null;
  return { candidate: record.candidate, incumbent: record.incumbent };
}

/**
 * The decision's paired rollouts, task by task, with which side the verifier accepted. The
 * decision keeps its replays by reference (batch, tasks, samples); the rollouts are read back
 * from the gateway's journal.
 */
export async function decisionPairs(gateway: GatewayControlClient, decision: StoredDecision): Promise<DecisionPair[]> {
  const replays = decisionReplays(decision);
  if (!replays) return [];
  const acceptReward = (decision.record as { rules?: { acceptReward?: number } }).rules?.acceptReward ?? 1;
  const { candidate, incumbent } = replays;
  const pairs: DecisionPair[] = [];
  for (const taskId of incumbent.taskIds) {
    for (let sample = 0; sample < incumbent.samplesPerTask; sample++) {
      const [inc, cand] = await Promise.all([
        side(gateway, rolloutIdFor(incumbent.batchId, taskId, sample)),
        side(gateway, rolloutIdFor(candidate.batchId, taskId, sample)),
      ]);
      const accepted = (s: PairSide) => s.reward !== null && s.reward >= acceptReward;
      const outcome =
        inc.reward === null || cand.reward === null
          ? 'unscored'
          : accepted(cand) === accepted(inc)
            ? accepted(cand)
              ? 'both'
              : 'neither'
            : accepted(cand)
              ? 'gained'
              : 'lost';
      pairs.push({ taskId, sample, incumbent: inc, candidate: cand, outcome });
    }
  }
  return pairs;
}

async function side(gateway: GatewayControlClient, rolloutId: string): Promise<PairSide> {
  try {
    const [rollout, events] = await Promise.all([gateway.getRollout(rolloutId), gateway.listEvents(rolloutId)]);
    return {
      rolloutId,
      status: rollout.status,
      reward: recordedRewards(events).verified ?? null,
      failureClass: rollout.failureClass,
    };
  } catch (err) {
    if ((err as { status?: number }).status === 404)
      return { rolloutId, status: null, reward: null, failureClass: null };
    throw err;
  }
}
