import type { GatewayControlClient } from '../gateway/control-client.js';
import type { StoredDecision } from '../registry/policy-registry.js';
import type { FailureClass, RolloutStatus } from '../rollouts/rollout.js';
import { iterationBatchId } from '../rollouts/rollout-id.js';
import type { ListedRollout, RolloutFilter } from '../store/trace-store.js';
import type { MismatchCause } from '../samples/merge.js';
import { ROLLOUT_PAGE_MAX } from '../store/journal-listing.js';
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

/**
 * The rollout browser's filters, as the API takes them: the journal's, the run's iteration and kind, and a merge
 * cause (training rollouts with a call that did not extend its sequence for that cause, as the batch report says).
 */
export type RunRolloutQuery = Omit<RolloutFilter, 'batchId' | 'mode'> & {
  iteration?: number;
  kind?: 'train' | 'heldout';
  mergeCause?: MismatchCause;
};

/** The rollouts of an iteration's batch with a call of each merge cause (BatchReport.mismatchRolloutIds). */
export type MismatchRollouts = (iteration: number) => Promise<Partial<Record<MismatchCause, string[]>>>;

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
  /** Rollouts of the journal page at `after` already looked at (a filtered page can end inside it). */
  skip?: number;
}

/**
 * A page of a run's rollouts, newest iteration first, filtered; the next page's cursor is null on the last one.
 * Each batch is read from the gateway's journal, a page of at most `limit` at a time.
 */
export async function runRollouts(
  gateway: Pick<GatewayControlClient, 'listRollouts'>,
  batches: readonly RunBatch[],
  query: RunRolloutQuery,
  mismatchRollouts?: MismatchRollouts,
): Promise<{ items: RunRolloutRow[]; next: string | null }> {
  const limit = query.limit ?? 50;
  const { iteration: _iteration, kind: _kind, limit: _limit, after: _after, mergeCause, ...filter } = query;
  const chosen = chosenBatches(batches, query);
  const items: RunRolloutRow[] = [];
  let index = 0;
  let { after, skip = 0 }: Omit<Cursor, 'batchId'> = {};
  if (query.after !== undefined) {
    const cursor = decodeRunCursor(query.after);
    index = chosen.findIndex((b) => b.batchId === cursor.batchId);
    if (index < 0)
      throw new RunCursorError(`the cursor names batch ${cursor.batchId}, which these filters do not list`);
    ({ after, skip = 0 } = cursor);
  }
  while (index < chosen.length && items.length < limit) {
    const batch = chosen[index] as RunBatch;
    const keep = mergeCause && new Set((await mismatchRollouts?.(batch.iteration))?.[mergeCause] ?? []);
    // Unfiltered, a journal page is exactly what is left to fill; filtered here, a whole page is looked through.
    const page = await gateway.listRollouts({
      ...filter,
      batchId: batch.batchId,
      limit: keep ? ROLLOUT_PAGE_MAX : limit - items.length,
      ...(after !== undefined && { after }),
    });
    let looked = skip;
    for (const rollout of page.items.slice(skip)) {
      if (items.length === limit) break;
      looked++;
      if (!keep || keep.has(rollout.id)) items.push(rowOf(rollout, batch));
    }
    if (looked < page.items.length) {
      skip = looked;
      break;
    }
    skip = 0;
    after = page.next ?? undefined;
    if (page.next === null) index++;
  }
  const next = chosen[index];
  const cursor: Cursor | null = next
    ? { batchId: next.batchId, ...(after !== undefined && { after }), ...(skip > 0 && { skip }) }
    : null;
  return { items, next: cursor && encodeRunCursor(cursor) };
}

/**
 * The batches the filters keep, in order; a replay two gates share is read once, under the newest iteration kept.
 * Only training batches have merge causes.
 */
function chosenBatches(batches: readonly RunBatch[], query: RunRolloutQuery): RunBatch[] {
  const seen = new Set<string>();
  return batches.filter((b) => {
    const kept =
      (query.iteration === undefined || b.iteration === query.iteration) &&
      (!query.kind || b.kind === query.kind) &&
      (!query.mergeCause || b.kind === 'train') &&
      !seen.has(b.batchId);
    if (kept) seen.add(b.batchId);
    return kept;
  });
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
    if (
      typeof cursor.batchId === 'string' &&
      (cursor.after === undefined || typeof cursor.after === 'string') &&
      (cursor.skip === undefined || (Number.isInteger(cursor.skip) && cursor.skip > 0))
    )
      return cursor;
  } catch {
    // Said below.
  }
  throw new RunCursorError(`"${text}" is not a cursor this listing gave: use the "next" of the previous page, or none`);
}
