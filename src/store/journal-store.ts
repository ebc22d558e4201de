import { sql, type Kysely } from 'kysely';
import {
  isFinished,
  type NewEvent,
  type NewRollout,
  type Rollout,
  type RolloutEvent,
  type StatusChange,
} from '../rollouts/rollout.js';
import { GroupCommit } from './group-commit.js';
import { JournalDecoder, toShadowCall } from './journal-decoder.js';
import { RolloutLifecycle } from './journal-rollouts.js';
import { JournalRetentionQueries } from './journal-retention.js';
import { VerifierRewards } from './journal-rewards.js';
import { journalDialect, type JournalDialect } from './journal-dialect.js';
import { listRollouts } from './journal-listing.js';
import {
  beginCallRow,
  finishCallRow,
  remember,
  shadowCallRow,
  toEvent,
  toRollout,
  type CallRow,
  type SequenceBase,
} from './journal-rows.js';
import type { JournalTables } from './journal-schema.js';
import { JournalStatements } from './journal-statements.js';
import type { ConversationBase } from './request-codec.js';
import { RolloutCache } from './rollout-cache.js';
import type { SqlDatabase } from './sql/database.js';
import {
  StoreInputError,
  StoreNotFoundError,
  type AgedRollout,
  type AppendedEvent,
  type CallFinish,
  type CallRecord,
  type CallStart,
  type JournalRetention,
  type ListedRollout,
  type Page,
  type RolloutFilter,
  type ShadowCallFilter,
  type ShadowCallRecord,
  type TraceStore,
} from './trace-store.js';

/**
 * The trace store on either database: SQLite (embedded, one gateway) or PostgreSQL (several
 * gateways and services on other hosts sharing one journal). Journal writes (beginCall,
 * finishCall, recordShadowCall) are group-committed (see GroupCommit); a call's sequence number
 * comes from the database, so gateways writing calls of one rollout get unique, ordered numbers.
 *
 * A store may read the values a write is given until the write's promise settles: callers must
 * not change them before.
 */
export class SqlTraceStore implements TraceStore, JournalRetention {
  private readonly db: Kysely<JournalTables>;
  private readonly dialect: JournalDialect;
  private readonly statements: JournalStatements;
  private readonly lastSequence = new Map<string, SequenceBase>();
  private readonly lastConversation = new Map<string, ConversationBase>();
  /** Calls this store began and has not finished: their rollout, without asking the journal. */
  private readonly inFlight = new Map<string, string>();
  private readonly rollouts: RolloutCache;
  private readonly lifecycle: RolloutLifecycle;
  private readonly rewards: VerifierRewards;
  private readonly commits: GroupCommit;
  private readonly retention: JournalRetentionQueries;

  /** `gateway` names the gateway writing through the store (see PostgresTraceStoreOptions). */
  constructor(
    /** Its database: the coordination store (gateway membership, launch leases) lives beside the journal. */
    readonly database: SqlDatabase,
    private readonly gateway = 'default',
  ) {
    this.db = database.db as Kysely<JournalTables>;
    this.dialect = journalDialect(database.kind);
    this.statements = new JournalStatements(this.db, this.dialect);
    this.rollouts = new RolloutCache(this.dialect.changeCounter && (() => this.statements.changeCount(database.hot)));
    this.lifecycle = new RolloutLifecycle(database, this.statements, this.rollouts);
    // A reward changes no rollout row: the rollout cache stays as it is (the check reads the row in the transaction).
    this.rewards = new VerifierRewards(database, this.statements);
    this.commits = new GroupCommit(database.hot, () => this.forgetCaches());
    this.retention = new JournalRetentionQueries(database, this.dialect);
  }

  /** Settles once the schema is up to date (a SQLite file is migrated as it opens). */
  get ready(): Promise<void> {
    return this.database.ready;
  }

  createRollout(input: NewRollout & { id: string }): Promise<{ rollout: Rollout; created: boolean }> {
    return this.lifecycle.createRollout(input);
  }

  async getRollout(id: string): Promise<Rollout | undefined> {
    return this.rollouts.get(id, async () => {
      const row = await this.statements.rollout(this.database.hot, id);
      return row && toRollout(row);
    });
  }

  listRollouts(filter: RolloutFilter = {}): Promise<Page<ListedRollout>> {
    return listRollouts(this.db, this.dialect, filter);
  }

  async setRolloutStatus(id: string, change: StatusChange, source: RolloutEvent['source']): Promise<Rollout> {
    const rollout = await this.lifecycle.setRolloutStatus(id, change, source);
    if (isFinished(rollout.status)) {
      this.lastSequence.delete(id);
      this.lastConversation.delete(id);
    }
    return rollout;
  }

  startAttempt(id: string): Promise<Rollout> {
    return this.lifecycle.startAttempt(id);
  }

  reopenRollout(id: string, reason: string): Promise<Rollout> {
    return this.lifecycle.reopenRollout(id, reason);
  }

  async beginCall(call: CallStart): Promise<{ seq: number }> {
    return this.commits.write(async () => {
      const { row, conversation } = beginCallRow(call, await this.conversationBefore(call.rolloutId));
      if (conversation) remember(this.lastConversation, call.rolloutId, conversation);
      this.inFlight.set(call.id, call.rolloutId);
      return {
        lockKey: `${call.rolloutId}\u0000${call.attempt}`,
        run: async (db) => ({ seq: await this.statements.beginCall(db, { ...row, gateway: this.gateway }) }),
      };
    });
  }

  async finishCall(id: string, result: CallFinish): Promise<void> {
    await this.commits.write(async () => {
      // Calls begun by this store are known; after a restart (or for another gateway's call), ask the journal.
      const rolloutId = this.inFlight.get(id) ?? (await this.statements.rolloutOfCall(this.database.hot, id));
      if (!rolloutId) throw new StoreNotFoundError(`call ${id} was never begun`);
      const { row, sequence } = finishCallRow(id, result, await this.sequenceBefore(rolloutId));
      this.inFlight.delete(id);
      // The next prompt of the rollout is stored as a delta over this one (forgotten if the write fails).
      if (sequence) remember(this.lastSequence, rolloutId, sequence);
      return {
        lockKey: null,
        run: async (db) => {
          if ((await this.statements.finishCall(db, row)) === 0)
            throw new StoreNotFoundError(`call ${id} was never begun`);
        },
      };
    });
  }

  async getCall(id: string): Promise<CallRecord | undefined> {
    const rows = await this.callChains([id]);
    const row = rows.get(id);
    return row && new JournalDecoder((ref) => rows.get(ref)).record(row);
  }

  async markLostCalls(before: number, reason: string): Promise<number> {
    const lostCalls = this.dialect.lostCallsOf(this.gateway);
    return this.commits.write(async () => ({
      lockKey: null,
      run: async (db) => {
        const lost = this.db
          .updateTable('calls')
          .set((eb) => ({
            status: 'error',
            error_class: 'gateway_lost',
            error_message: reason,
            latency_ms: eb(eb.val(before), '-', eb.ref('started_at')),
          }))
          .where('status', '=', 'in_flight')
          .where('started_at', '<', before)
          .$if(lostCalls !== null, (q) => q.where(lostCalls!));
        return Number((await db.executeQuery(lost.compile())).numAffectedRows ?? 0);
      },
    }));
  }

  async listCalls(rolloutId: string, attempt?: number): Promise<CallRecord[]> {
    // Every call of the rollout: a call's references point at earlier calls of the same rollout.
    const rows = await this.db
      .selectFrom('calls')
      .selectAll()
      .where('rollout_id', '=', rolloutId)
      .orderBy('attempt')
      .orderBy('seq')
      .execute();
    const byId = new Map(rows.map((r) => [r.id, r]));
    const decoder = new JournalDecoder((ref) => byId.get(ref));
    return rows.filter((r) => attempt === undefined || r.attempt === attempt).map((r) => decoder.record(r));
  }

  async recordShadowCall(call: ShadowCallRecord): Promise<void> {
    await this.commits.write(async () => {
      const row = shadowCallRow(call, await this.conversationBefore(call.rolloutId));
      return { lockKey: null, run: (db) => db.executeQuery(this.db.insertInto('shadow_calls').values(row).compile()) };
    });
  }

  async listShadowCalls(filter: ShadowCallFilter): Promise<ShadowCallRecord[]> {
    let afterSeq: number | undefined;
    if (filter.after !== undefined) {
      afterSeq = (
        await this.db.selectFrom('shadow_calls').select('seq').where('id', '=', filter.after).executeTakeFirst()
      )?.seq;
      if (afterSeq === undefined) {
        throw new StoreInputError(
          `no shadow call "${filter.after}" to continue after; pass the id of the last shadow call of the previous page`,
        );
      }
    }
    const rows = await this.db
      .selectFrom('shadow_calls')
      .selectAll()
      .$if(filter.candidate !== undefined, (q) => q.where('candidate_version', '=', filter.candidate!))
      .$if(filter.rolloutId !== undefined, (q) => q.where('rollout_id', '=', filter.rolloutId!))
      .$if(afterSeq !== undefined, (q) => q.where('seq', '>', afterSeq!))
      .orderBy('seq')
      .$if(filter.limit !== undefined, (q) => q.limit(Math.max(filter.limit!, 0)))
      .execute();
    // One load for the page: shadow calls of a rollout share its conversation's calls.
    const calls = await this.callChains(rows.flatMap((r) => (r.conversation_ref ? [r.conversation_ref] : [])));
    const decoder = new JournalDecoder((ref) => calls.get(ref));
    return rows.map((row) => toShadowCall(row, decoder));
  }

  async appendEvent(
    rolloutId: string,
    attempt: number,
    event: NewEvent,
    source: RolloutEvent['source'],
  ): Promise<AppendedEvent> {
    const { type, ...payload } = event;
    const actionId = event.type === 'span' ? event.actionId : null;
    const newRow = {
      rollout_id: rolloutId,
      attempt,
      type,
      source,
      action_id: actionId,
      payload: JSON.stringify(payload),
      at: Date.now(),
    };
    if (type === 'reward' && source === 'admin') {
      const recorded = await this.rewards.append(newRow);
      return recorded.duplicate ? { ...toEvent(recorded.row), duplicate: true } : toEvent(recorded.row);
    }
    const inserted = await this.statements.insertEvent(this.db, newRow);
    const row =
      inserted ??
      (actionId
        ? await this.db
            .selectFrom('events')
            .selectAll()
            .where('rollout_id', '=', rolloutId)
            .where('action_id', '=', actionId)
            .executeTakeFirst()
        : undefined);
    if (!row) throw new Error(`event for rollout ${rolloutId} was not recorded`);
    return toEvent(row);
  }

  async listEvents(rolloutId: string): Promise<RolloutEvent[]> {
    return (
      await this.db.selectFrom('events').selectAll().where('rollout_id', '=', rolloutId).orderBy('id').execute()
    ).map(toEvent);
  }

  async rolloutFootprint(rolloutId: string): Promise<{ calls: number; bytes: number }> {
    const length = this.dialect.footprintLength;
    const bytes = [
      `${length('request_received')} + ${length('request_sent_patch')}`,
      ...['response', 'prompt_suffix', 'completion_ids', 'logprobs', 'usage', 'finish_reasons'].map(
        (c) => `COALESCE(${length(c)}, 0)`,
      ),
    ].join(' + ');
    const row = (
      await sql<{
        calls: number;
        bytes: number | null;
      }>`SELECT COUNT(*) AS calls, SUM(${sql.raw(bytes)}) AS bytes FROM calls WHERE rollout_id = ${rolloutId}`.execute(
        this.db,
      )
    ).rows[0];
    return { calls: Number(row?.calls ?? 0), bytes: Number(row?.bytes ?? 0) };
  }

  async listAgedRollouts(before: number, page: { after?: string; limit?: number } = {}): Promise<Page<AgedRollout>> {
    return this.retention.listAgedRollouts(before, page);
  }

  async activeBatchIds(since: number): Promise<string[]> {
    return this.retention.activeBatchIds(since);
  }

  async deleteFinishedRollouts(ids: readonly string[], before: number): Promise<string[]> {
    const deleted = await this.retention.deleteFinishedRollouts(ids, before);
    for (const id of deleted) this.rollouts.forget(id);
    return deleted;
  }

  async close(): Promise<void> {
    // Writes already requested are committed (or fail) before the database closes.
    await this.commits.drain();
    await this.database.close();
  }

  private forgetCaches(): void {
    this.lastSequence.clear();
    this.lastConversation.clear();
    // Calls begun in a failed write are looked up in the journal, where they are not.
    this.inFlight.clear();
  }

  /** Rows of the calls with these ids and of every call they refer to, by id, in one query. */
  private async callChains(ids: string[]): Promise<Map<string, CallRow>> {
    if (ids.length === 0) return new Map();
    const rows = await sql<CallRow>`
      WITH RECURSIVE chain AS (
        SELECT * FROM calls WHERE ${this.database.isIn('id', [...new Set(ids)])}
        UNION
        SELECT c.* FROM calls c JOIN chain p ON c.id = p.prompt_ref OR c.id = p.conversation_ref
      )
      SELECT * FROM chain`.execute(this.db);
    return new Map(rows.rows.map((r) => [r.id, r]));
  }

  private async sequenceBefore(rolloutId: string): Promise<SequenceBase | undefined> {
    const cached = this.lastSequence.get(rolloutId);
    if (cached) return cached;
    // After a restart (or a call another gateway journaled): rebuild from the journal.
    const last = await this.statements.latestFinishedCall(this.database.hot, rolloutId);
    if (!last) return undefined;
    const rows = await this.callChains([last]);
    return { callId: last, ids: new JournalDecoder((ref) => rows.get(ref)).sequence(last) };
  }

  private async conversationBefore(rolloutId: string): Promise<ConversationBase | undefined> {
    const cached = this.lastConversation.get(rolloutId);
    if (cached) return cached;
    const last = await this.statements.latestConversationCall(this.database.hot, rolloutId);
    if (!last) return undefined;
    const rows = await this.callChains([last]);
    return { callId: last, items: new JournalDecoder((ref) => rows.get(ref)).conversation(last) };
  }
}
