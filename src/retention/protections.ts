import type { PolicyRegistry } from '../registry/policy-registry.js';
import { iterationBatchId, rolloutIdFor } from '../rollouts/rollout-id.js';

/** Why retention keeps a rollout that is old enough to go. */
export const PROTECTION_REASONS = ['unfinished', 'policyBatch', 'decision', 'batchInUse'] as const;
export type ProtectionReason = (typeof PROTECTION_REASONS)[number];

export const PROTECTION_LABELS: Record<ProtectionReason, string> = {
  unfinished: 'unfinished (queued or running)',
  policyBatch: 'in the batch a registered policy version was trained on',
  decision: 'cited by a gate decision',
  batchInUse: 'in a batch still in use (another of its rollouts is unfinished or newer than the cutoff)',
};

/** What must stay, whatever its age; each entry names who needs it (a version, a decision, a batch). */
export interface Protections {
  /** Batch id → the registered version trained on it. */
  policyBatches: ReadonlyMap<string, string>;
  /** Batch id of a replay a decision compared → the decision. */
  decisionBatches: ReadonlyMap<string, string>;
  /** Rollout id a decision names → the decision. */
  decisionRollouts: ReadonlyMap<string, string>;
  /** Batches with a rollout unfinished or changed since the cutoff: a run may still read them. */
  activeBatches: ReadonlySet<string>;
}

/** A rollout as protection sees it. */
export interface RolloutKey {
  id: string;
  status: string;
  batchId: string | null;
}

const FINISHED = new Set(['succeeded', 'failed', 'cancelled']);

/** Why a rollout must stay, and who needs it; null when nothing does. */
export function protectionOf(rollout: RolloutKey, p: Protections): { reason: ProtectionReason; by: string } | null {
  if (!FINISHED.has(rollout.status)) return { reason: 'unfinished', by: rollout.id };
  const batch = rollout.batchId;
  const version = batch === null ? undefined : p.policyBatches.get(batch);
  if (version !== undefined) return { reason: 'policyBatch', by: version };
  const decision = p.decisionRollouts.get(rollout.id) ?? (batch === null ? undefined : p.decisionBatches.get(batch));
  if (decision !== undefined) return { reason: 'decision', by: decision };
  if (batch !== null && p.activeBatches.has(batch)) return { reason: 'batchInUse', by: batch };
  return null;
}

interface RolloutSetRecord {
  batchId?: unknown;
  taskIds?: unknown;
  samplesPerTask?: unknown;
}

/**
 * What the registry says must stay: the batch every trained version was built from (a training
 * iteration's batch is `<run>.it<n>`, its rollouts carry that batch id), and every rollout a
 * decision compared (its two replays) or names as evidence in a check.
 */
export async function registryProtections(registry: PolicyRegistry): Promise<Omit<Protections, 'activeBatches'>> {
  const policyBatches = new Map<string, string>();
  const decisionBatches = new Map<string, string>();
  const decisionRollouts = new Map<string, string>();
  const versions = await registry.list();
  for (const policy of versions) {
    if (policy.runId !== null && policy.iteration !== null && policy.batchContentHash !== null)
      policyBatches.set(iterationBatchId(policy.runId, policy.iteration), policy.version);
  }
  for (const policy of versions) {
    for (const decision of await registry.decisionsFor(policy.version)) {
      const record = decision.record as {
        candidate?: RolloutSetRecord;
        incumbent?: RolloutSetRecord;
        checks?: Array<{ rollouts?: unknown }>;
      };
      for (const set of [record.candidate, record.incumbent]) {
        if (typeof set?.batchId !== 'string') continue;
        decisionBatches.set(set.batchId, decision.id);
        // The ids the replay gave its rollouts, should one have lost its batch id.
        if (Array.isArray(set.taskIds) && typeof set.samplesPerTask === 'number') {
          for (const task of set.taskIds)
            for (let s = 0; s < set.samplesPerTask; s++)
              decisionRollouts.set(rolloutIdFor(set.batchId, String(task), s), decision.id);
        }
      }
      for (const check of record.checks ?? []) {
        if (Array.isArray(check.rollouts))
          for (const id of check.rollouts) if (typeof id === 'string') decisionRollouts.set(id, decision.id);
      }
    }
  }
  return { policyBatches, decisionBatches, decisionRollouts };
}
