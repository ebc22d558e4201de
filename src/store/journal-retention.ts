import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { JournalDialect } from './journal-dialect.js';
import type { RolloutStatus } from '../rollouts/rollout.js';
import { decodeCursor, encodeCursor, FINISHED_STATUSES } from './journal-rows.js';
import type { JournalTables } from './journal-schema.js';
import type { SqlDatabase } from './sql/database.js';
import type { AgedRollout, Page } from './trace-store.js';

/** What `rein gc` asks of the journal (JournalRetention), on either database. */
export class JournalRetentionQueries {
  private readonly db: Kysely<JournalTables>;

  constructor(
    private readonly database: SqlDatabase,
    private readonly dialect: JournalDialect,
  ) {
    this.db = database.db as Kysely<JournalTables>;
  }

  async listAgedRollouts(before: number, page: { after?: string; limit?: number }): Promise<Page<AgedRollout>> {
    const limit = Math.min(Math.max(page.limit ?? 500, 1), 5000);
    const query = agedRolloutsQuery(
      this.dialect.byteLength,
      before,
      page.after === undefined ? 0 : decodeCursor(page.after),
      limit + 1,
    );
    return agedRolloutPage((await query.execute(this.db)).rows, limit);
  }

  async activeBatchIds(since: number): Promise<string[]> {
    const rows = await sql<{ batch: string | number }>`
      SELECT DISTINCT batch FROM (SELECT ${this.dialect.batchIdOfMetadata} AS batch FROM rollouts
        WHERE status NOT IN (${sql.join(FINISHED_STATUSES)}) OR updated_at >= ${since}) b
      WHERE batch IS NOT NULL`.execute(this.db);
    return rows.rows.map((r) => String(r.batch));
  }

  /**
   * The ids deleted: those of `ids` finished and unchanged since before `before`, with their rows, in one transaction.
   */
  async deleteFinishedRollouts(ids: readonly string[], before: number): Promise<string[]> {
    const { isIn } = this.database;
    return this.db.transaction().execute(async (trx) => {
      // PostgreSQL locks them: a status change or a call being journaled for one of them waits, then finds it gone.
      // SQLite's IMMEDIATE transaction holds the write lock, so none slips in between the check and the deletes.
      const doomed = (
        await trx
          .selectFrom('rollouts')
          .select('id')
          .where(isIn('id', ids))
          .where('status', 'in', FINISHED_STATUSES)
          .where('updated_at', '<', before)
          .orderBy('id')
          .$if(this.database.rowLocks, (q) => q.forUpdate())
          .execute()
      ).map((r) => r.id);
      for (const table of this.dialect.rolloutTables)
        await trx.deleteFrom(table).where(isIn('rollout_id', doomed)).execute();
      await trx.deleteFrom('rollouts').where(isIn('id', doomed)).execute();
      return doomed;
    });
  }
}

/** A rollout row with its journal's counts and size, as both stores list them for retention. */
interface AgedRolloutRow {
  seq: number;
  id: string;
  status: RolloutStatus;
  metadata: string;
  updated_at: number;
  calls: number;
  shadow_calls: number;
  events: number;
  bytes: number | null;
}

function toAgedRollout(row: AgedRolloutRow): AgedRollout {
  const batchId = (JSON.parse(row.metadata) as { batchId?: unknown }).batchId;
  return {
    id: row.id,
    status: row.status,
    batchId: typeof batchId === 'string' ? batchId : null,
    updatedAt: Number(row.updated_at),
    calls: Number(row.calls),
    shadowCalls: Number(row.shadow_calls),
    events: Number(row.events),
    bytes: Number(row.bytes ?? 0),
  };
}

/** A page of aged rollouts: the cursor continues after the last one's seq. */
function agedRolloutPage(rows: AgedRolloutRow[], limit: number): Page<AgedRollout> {
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return { items: items.map(toAgedRollout), next: rows.length > limit && last ? encodeCursor(last.seq) : null };
}

/**
 * The select of aged rollouts, for either database: `length` is the SQL that gives a value's size
 * in bytes; rollouts changed before `before`, after seq `afterSeq`, at most `limit`.
 */
function agedRolloutsQuery(
  length: (column: string) => string,
  before: number,
  afterSeq: number,
  limit: number,
): RawBuilder<AgedRolloutRow> {
  const sum = (columns: string[]) => columns.map((c) => `COALESCE(${length(c)}, 0)`).join(' + ');
  const callBytes = sum([
    'request_received',
    'request_sent_patch',
    'response',
    'prompt_suffix',
    'completion_ids',
    'logprobs',
    'usage',
    'finish_reasons',
    'error_message',
  ]);
  const shadowBytes = sum([
    'request_sent',
    'response',
    'completion_ids',
    'logprobs',
    'finish_reasons',
    'error_message',
  ]);
  const select = `
SELECT r.seq, r.id, r.status, r.metadata, r.updated_at,
  (SELECT COUNT(*) FROM calls c WHERE c.rollout_id = r.id) AS calls,
  (SELECT COUNT(*) FROM shadow_calls s WHERE s.rollout_id = r.id) AS shadow_calls,
  (SELECT COUNT(*) FROM events e WHERE e.rollout_id = r.id) AS events,
  ${sum(['r.metadata', 'r.status_reason'])}
  + COALESCE((SELECT SUM(${callBytes}) FROM calls c WHERE c.rollout_id = r.id), 0)
  + COALESCE((SELECT SUM(${shadowBytes}) FROM shadow_calls s WHERE s.rollout_id = r.id), 0)
  + COALESCE((SELECT SUM(${length('payload')}) FROM events e WHERE e.rollout_id = r.id), 0) AS bytes
FROM rollouts r`;
  return sql<AgedRolloutRow>`${sql.raw(select)} WHERE r.updated_at < ${before} AND r.seq > ${afterSeq} ORDER BY r.seq LIMIT ${limit}`;
}
