import type { GatewayControlClient } from '../gateway/control-client.js';
import type { StoredDecision } from '../registry/policy-registry.js';
import type { FailureClass, RolloutStatus } from '../rollouts/rollout.js';
import { iterationBatchId } from '../rollouts/rollout-id.js';
import type { ListedRollout, RolloutFilter } from '../store/trace-store.js';
import { decisionReplays } from './decision-pairs.js';

/** A batch of rollouts that belongs to a run: an iteration's training rollouts, or one side of its gate's replay. */
export interface RunBatch {
  batchId: string;
  iteration: number;
  kind: 'train' | 'heldout';
  /** For held-out replays: which side of the gate (the incumbent's replay may be another run's, reused). */
  side: 'candidate' | 'incumbent' | null;
}

/** What a run's iterations say about their batches (RunProgress's iterations, as the run report has them). */
export interface IterationRef {
  iteration: number;
  gate?: { decisionId: string };
}

/**
 * A run's batches, newest iteration first, each iteration's training batch before its replays: every iteration
 * the run reported, and the one it works on (`through`). A replay two gates share (the candidate of one is the
 * incumbent of the next) is listed under both; runRollouts reads it once.
 */
export function runBatches(
  runId: string,
  iterations: readonly IterationRef[],
  through: number,
  decision: (id: string) => StoredDecision | undefined,
): RunBatch[] {
  const gates = new Map(iterations.flatMap((i) => (i.gate ? [[i.iteration, i.gate.decisionId] as const] : [])));
  const last = Math.max(through, ...iterations.map((i) => i.iteration));
  const batches: RunBatch[] = [];
  for (let iteration = last; iteration >= 1; iteration--) {
    batches.push({ batchId: iterationBatchId(runId, iteration), iteration, kind: 'train', side: null });
    const decisionId = gates.get(iteration);
    const replays = decisionId === undefined ? null : decisionReplays(decision(decisionId) ?? NO_DECISION);
    if (!replays) continue;
    batches.push(
      { batchId: replays.candidate.batchId, iteration, kind: 'heldout', side: 'candidate' },
      { batchId: replays.incumbent.batchId, iteration, kind: 'heldout', side: 'incumbent' },
    );
  }
  return batches;
}

const NO_DECISION = { record: {} } as StoredDecision;

/** The rollout browser's filters, as the API takes them: the journal's, and the run's iteration and kind. */
export type RunRolloutQuery = Omit<RolloutFilter, 'batchId' | 'mode'> & {
  iteration?: number;
  kind?: 'train' | 'heldout';
};

/** A row of the rollout browser. */
export interface RunRolloutRow {
  rolloutId: string;
  iteration: number;
  kind: 'train' | 'heldout';
  side: 'candidate' | 'incumbent' | null;
  taskId: string | null;
  sample: number | null;
  status: RolloutStatus;
  failureClass: FailureClass | null;
  /** The verifier's reward of its current attempt; null when it has none. */
  reward: number | null;
  policyVersion: string | null;
  attempts: number;
  updatedAt: string;
}

/**
 * Where a page ended: the batch (by id, so iterations a running run adds meanwhile shift nothing) and the journal's
 * cursor within it.
 */
interface Cursor {
  batchId: string;
  after?: string;
}

/**
 * A page of a run's rollouts, newest iteration first, filtered; the next page's cursor is null on the last one.
 * Each batch is read from the gateway's journal, a page of at most `limit` at a time.
 */
export async function runRollouts(
  gateway: Pick<GatewayControlClient, 'listRollouts'>,
  batches: readonly RunBatch[],
  query: RunRolloutQuery,
): Promise<{ items: RunRolloutRow[]; next: string | null }> {
  const limit = query.limit ?? 50;
  // A replay two gates share is read once, under the newest iteration the filters keep.
  const seen = new Set<string>();
  const chosen = batches.filter((b) => {
    const kept =
      (query.iteration === undefined || b.iteration === query.iteration) &&
      (!query.kind || b.kind === query.kind) &&
      !seen.has(b.batchId);
    if (kept) seen.add(b.batchId);
    return kept;
  });
  const { iteration: _iteration, kind: _kind, limit: _limit, after: _after, ...filter } = query;
  const items: RunRolloutRow[] = [];
  let index = 0;
  let after: string | undefined;
  if (query.after !== undefined) {
    const cursor = decodeRunCursor(query.after);
    index = chosen.findIndex((b) => b.batchId === cursor.batchId);
    if (index < 0)
      throw new RunCursorError(`the cursor names batch ${cursor.batchId}, which these filters do not list`);
    after = cursor.after;
  }
  while (index < chosen.length && items.length < limit) {
    const batch = chosen[index] as RunBatch;
    const page = await gateway.listRollouts({
      ...filter,
      batchId: batch.batchId,
      limit: limit - items.length,
      ...(after !== undefined && { after }),
    });
    items.push(...page.items.map((r) => rowOf(r, batch)));
    after = page.next ?? undefined;
    if (page.next === null) index++;
  }
  const next = chosen[index];
  return {
    items,
    next: next ? encodeRunCursor({ batchId: next.batchId, ...(after !== undefined && { after }) }) : null,
  };
}

function rowOf(rollout: ListedRollout, batch: RunBatch): RunRolloutRow {
  const sample = rollout.metadata.sample;
  return {
    rolloutId: rollout.id,
    iteration: batch.iteration,
    kind: batch.kind,
    side: batch.side,
    taskId: rollout.taskId,
    sample: typeof sample === 'number' ? sample : null,
    status: rollout.status,
    failureClass: rollout.failureClass,
    reward: rollout.reward,
    policyVersion: rollout.policyVersion,
    attempts: rollout.attempts,
    updatedAt: rollout.updatedAt,
  };
}

/** A page cursor this listing did not give (the API answers 400). */
export class RunCursorError extends Error {}

function encodeRunCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

function decodeRunCursor(text: string): Cursor {
  try {
    const cursor = JSON.parse(Buffer.from(text, 'base64url').toString()) as Cursor;
    if (typeof cursor.batchId === 'string' && (cursor.after === undefined || typeof cursor.after === 'string'))
      return cursor;
  } catch {
    // Said below.
  }
  throw new RunCursorError(`"${text}" is not a cursor this listing gave: use the "next" of the previous page, or none`);
}
