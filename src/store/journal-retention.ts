import { sql, type Kysely } from 'kysely';
import type { JournalDialect } from './journal-dialect.js';
import { agedRolloutPage, agedRolloutsQuery, decodeCursor, FINISHED_STATUSES } from './journal-rows.js';
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
    const query = agedRolloutsQuery(this.dialect.byteLength, before, page.after === undefined ? 0 : decodeCursor(page.after), limit + 1);
    return agedRolloutPage((await query.execute(this.db)).rows, limit);
  }

  async activeBatchIds(since: number): Promise<string[]> {
    const rows = await sql<{ batch: string | number }>`
      SELECT DISTINCT batch FROM (SELECT ${this.dialect.batchIdOfMetadata} AS batch FROM rollouts
        WHERE status NOT IN (${sql.join(FINISHED_STATUSES)}) OR updated_at >= ${since}) b
      WHERE batch IS NOT NULL`.execute(this.db);
    return rows.rows.map((r) => String(r.batch));
  }

  /** The ids deleted: those of `ids` finished and unchanged since before `before`, with their rows, in one transaction. */
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
      for (const table of this.dialect.rolloutTables) await trx.deleteFrom(table).where(isIn('rollout_id', doomed)).execute();
      await trx.deleteFrom('rollouts').where(isIn('id', doomed)).execute();
      return doomed;
    });
  }
}
