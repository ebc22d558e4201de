import type { Client } from '@temporalio/client';
import type { ReinConfig } from '../config/schema.js';
import { PRODUCTION_ALIAS } from '../registry/promotion.js';
import { storeIdentity, storeLocation } from '../store/location.js';
import type { TrainingRunInput } from '../../workflows/index.js';
import { PromotionConflictError } from './run-errors.js';

/**
 * Which production a run may move: its store and alias, kept in the run's memo (`promotes`) so
 * that the next start can see it. Two runs gating into one alias at once would each measure
 * their candidate against a production the other may move.
 */
export interface PromotionGuard {
  /** storeIdentity() of the store whose alias the run moves. */
  store: string;
  /** Start even when another running run promotes into the same alias (config gate.concurrentRuns: allow). */
  allowConcurrent: boolean;
}

export function promotionGuard(config: ReinConfig): PromotionGuard {
  return { store: storeIdentity(storeLocation(config)), allowConcurrent: config.gate.concurrentRuns === 'allow' };
}

/** The memo entry that says what a run promotes into: none for a run that does not promote. */
export function promotionMemo(
  input: Pick<TrainingRunInput, 'release'>,
  guard: PromotionGuard | undefined,
): { promotes?: string } {
  return guard && input.release?.promote ? { promotes: `${PRODUCTION_ALIAS} of ${guard.store}` } : {};
}

/**
 * Refuses a start while another run promotes into the same alias. Read from Temporal's visibility
 * store, which may lag a start by a moment: two starts at the same instant can both pass, and then
 * the promotion's compare-and-set (the alias moves only from where the gate measured it) still
 * keeps the second from overwriting the first.
 */
export async function refuseConcurrentPromotion(client: Client, runId: string, promotes: string): Promise<void> {
  const query = `WorkflowType = 'trainingRun' AND ExecutionStatus = 'Running'`;
  for await (const wf of client.workflow.list({ query, pageSize: 100 })) {
    if (wf.workflowId === runId || wf.memo?.promotes !== promotes) continue;
    throw new PromotionConflictError(
      `run ${wf.workflowId} (started ${wf.startTime.toISOString()}) is still running and promotes into ${promotes}; two runs gating into one alias at once would each judge ` +
        `their candidate against a production the other may move. Wait for it (\`rein status ${wf.workflowId}\`), stop it (\`rein stop ${wf.workflowId}\` or \`rein cancel ${wf.workflowId}\`), ` +
        `start this one with gate.autoPromote: false, or set gate.concurrentRuns: allow`,
    );
  }
}
