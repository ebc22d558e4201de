import type Database from 'better-sqlite3';
import { openDatabaseFile } from './sqlite-driver.js';
import {
  canTransition,
  isFinished,
  isUnscored,
  newRolloutSchema,
  statusChangeSchema,
  type NewEvent,
  type NewRollout,
  type Rollout,
  type RolloutEvent,
  type StatusChange,
} from '../rollouts/rollout.js';
import type { ConversationBase } from './request-codec.js';
import {
  agedRolloutPage,
  agedRolloutsSql,
  beginCallRow,
  decodeCursor,
  FINISHED_STATUSES_SQL,
  encodeCursor,
  finishCallRow,
  copyOfMetadata,
  JournalDecoder,
  refuseOtherBody,
  remember,
  SEQUENCE_CACHE_SIZE,
  shadowCallRow,
  toEvent,
  toRollout,
  toShadowCall,
  type AgedRolloutRow,
  type CallRow,
  type EventRow,
  type RolloutRow,
  type SequenceBase,
  type ShadowCallRow,
} from './journal-rows.js';
import { applySqliteMigrations, type Migration } from './migrations.js';
import {
  StoreConflictError,
  StoreInputError,
  StoreNotFoundError,
  type CallFinish,
  type CallRecord,
  type CallStart,
  type Page,
  type RolloutFilter,
  type ShadowCallFilter,
  type ShadowCallRecord,
  type AgedRollout,
  type JournalRetention,
  type TraceStore,
} from './trace-store.js';

/**
 * The journal's schema, one migration per change. Migration 1 is the schema from before versions
 * were recorded, written with IF NOT EXISTS, so a journal made then opens as it is.
 */
const MIGRATIONS: Migration[] = [{ version: 1, name: 'rollouts, calls, events, shadow calls', sql: `
CREATE TABLE IF NOT EXISTS rollouts (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  task_id TEXT,
  mode TEXT NOT NULL,
  status TEXT NOT NULL,
  status_reason TEXT,
  attempts INTEGER NOT NULL,
  keyless INTEGER NOT NULL,
  policy_version TEXT,
  failure_class TEXT,
  metadata TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS rollouts_status ON rollouts(status, seq);
CREATE INDEX IF NOT EXISTS rollouts_task ON rollouts(task_id, seq);

CREATE TABLE IF NOT EXISTS calls (
  id TEXT PRIMARY KEY,
  rollout_id TEXT NOT NULL REFERENCES rollouts(id),
  attempt INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  endpoint TEXT NOT NULL,
  policy_version TEXT NOT NULL,
  backend_url TEXT NOT NULL,
  stream INTEGER NOT NULL,
  request_received TEXT NOT NULL,
  request_sent_patch TEXT NOT NULL,
  conversation_field TEXT,
  conversation_ref TEXT,
  conversation_prefix INTEGER,
  started_at INTEGER NOT NULL,
  status TEXT NOT NULL,
  response TEXT,
  prompt_ref TEXT,
  prompt_prefix_length INTEGER,
  prompt_suffix BLOB,
  completion_ids BLOB,
  logprobs BLOB,
  finish_reasons TEXT,
  usage TEXT,
  upstream_status INTEGER,
  error_class TEXT,
  error_message TEXT,
  ttft_ms REAL,
  latency_ms REAL,
  UNIQUE (rollout_id, attempt, seq)
);

CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  rollout_id TEXT NOT NULL REFERENCES rollouts(id),
  attempt INTEGER NOT NULL,
  type TEXT NOT NULL,
  source TEXT NOT NULL,
  action_id TEXT,
  payload TEXT NOT NULL,
  at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS events_rollout ON events(rollout_id, id);
CREATE UNIQUE INDEX IF NOT EXISTS events_action ON events(rollout_id, action_id) WHERE action_id IS NOT NULL;

-- Mirror mode's candidate answers; a table of their own so no reader of calls ever sees them.
-- The request's conversation is stored as a reference into calls, like a call's own.
CREATE TABLE IF NOT EXISTS shadow_calls (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  primary_call_id TEXT NOT NULL REFERENCES calls(id),
  rollout_id TEXT NOT NULL REFERENCES rollouts(id),
  attempt INTEGER NOT NULL,
  candidate_version TEXT NOT NULL,
  incumbent_version TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  backend_url TEXT NOT NULL,
  request_sent TEXT NOT NULL,
  conversation_field TEXT,
  conversation_ref TEXT,
  conversation_prefix INTEGER,
  response TEXT,
  completion_ids BLOB,
  logprobs BLOB,
  finish_reasons TEXT,
  status TEXT NOT NULL,
  error_class TEXT,
  error_message TEXT,
  upstream_status INTEGER,
  latency_ms REAL NOT NULL,
  started_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS shadow_calls_candidate ON shadow_calls(candidate_version, seq);
CREATE INDEX IF NOT EXISTS shadow_calls_rollout ON shadow_calls(rollout_id, seq);
` }];


/** A journal write waiting for the next group commit. */
interface PendingWrite {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/**
 * The embedded trace store: one SQLite file in WAL mode.
 *
 * Journal writes (beginCall, finishCall, recordShadowCall) are group-committed: those requested
 * while the event loop handles one round of I/O are written in one transaction when the round
 * ends (setImmediate), and each one's promise resolves only once that transaction has committed,
 * so "durable before it returns" holds as before while concurrent calls share one commit.
 */
export class SqliteTraceStore implements TraceStore, JournalRetention {
  private readonly db: Database.Database;
  private readonly lastSequence = new Map<string, SequenceBase>();
  private readonly lastConversation = new Map<string, ConversationBase>();
  private readonly inFlight = new Map<string, string>();
  private readonly statements;
  private pending: PendingWrite[] = [];
  private flushScheduled = false;
  private readonly commitBatch: Database.Transaction<(batch: PendingWrite[]) => unknown[]>;
  /**
   * Rollouts read lately, for the gateway's check of every call. Valid while no other connection
   * has committed (PRAGMA data_version, one cheap read) and this one has not changed the rollout.
   */
  private readonly rolloutCache = new Map<string, Rollout>();
  private rolloutCacheVersion = -1;

  constructor(file: string) {
    this.db = openDatabaseFile(file);
    this.db.pragma('journal_mode = WAL');
    // NORMAL in WAL mode: a committed call survives a killed process (not a power cut) without an fsync per call.
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('foreign_keys = ON');
    this.db.pragma('busy_timeout = 5000');
    applySqliteMigrations(this.db, 'traces', MIGRATIONS);
    addMissingColumns(this.db, 'rollouts', { policy_version: 'TEXT', failure_class: 'TEXT' });
    this.commitBatch = this.db.transaction((batch: PendingWrite[]) => batch.map((write) => write.run()));
    this.statements = {
      insertRollout: this.db.prepare(
        `INSERT INTO rollouts (id, task_id, mode, status, status_reason, attempts, keyless, policy_version, metadata, created_at, updated_at)
         VALUES (@id, @task_id, @mode, 'queued', NULL, 1, @keyless, @policy_version, @metadata, @now, @now) ON CONFLICT(id) DO NOTHING`,
      ),
      getRollout: this.db.prepare<[string], RolloutRow>('SELECT * FROM rollouts WHERE id = ?'),
      dataVersion: this.db.prepare<[], number>('PRAGMA data_version').pluck(),
      setStatus: this.db.prepare('UPDATE rollouts SET status = ?, status_reason = ?, failure_class = ?, updated_at = ? WHERE id = ?'),
      startAttempt: this.db.prepare('UPDATE rollouts SET attempts = attempts + 1, updated_at = ? WHERE id = ?'),
      reopen: this.db.prepare("UPDATE rollouts SET attempts = attempts + 1, status = 'queued', status_reason = ?, failure_class = NULL, updated_at = ? WHERE id = ?"),
      beginCall: this.db.prepare(
        `INSERT INTO calls (id, rollout_id, attempt, seq, endpoint, policy_version, backend_url, stream,
                            request_received, request_sent_patch, conversation_field, conversation_ref, conversation_prefix,
                            started_at, status)
         VALUES (@id, @rollout_id, @attempt,
                 (SELECT COALESCE(MAX(seq), 0) + 1 FROM calls WHERE rollout_id = @rollout_id AND attempt = @attempt),
                 @endpoint, @policy_version, @backend_url, @stream, @request_received, @request_sent_patch,
                 @conversation_field, @conversation_ref, @conversation_prefix, @started_at, 'in_flight')
         RETURNING seq`,
      ),
      finishCall: this.db.prepare(
        `UPDATE calls SET status = @status, response = @response, prompt_ref = @prompt_ref,
           prompt_prefix_length = @prompt_prefix_length, prompt_suffix = @prompt_suffix,
           completion_ids = @completion_ids, logprobs = @logprobs, finish_reasons = @finish_reasons, usage = @usage,
           upstream_status = @upstream_status, error_class = @error_class, error_message = @error_message,
           ttft_ms = @ttft_ms, latency_ms = @latency_ms
         WHERE id = @id`,
      ),
      markLostCalls: this.db.prepare(
        `UPDATE calls SET status = 'error', error_class = 'gateway_lost', error_message = ?, latency_ms = ? - started_at
         WHERE status = 'in_flight' AND started_at < ?`,
      ),
      getCall: this.db.prepare<[string], CallRow>('SELECT * FROM calls WHERE id = ?'),
      rolloutOfCall: this.db.prepare<[string], { rollout_id: string }>('SELECT rollout_id FROM calls WHERE id = ?'),
      lastConversationCall: this.db.prepare<[string], { id: string }>(
        `SELECT id FROM calls WHERE rollout_id = ? AND conversation_field IS NOT NULL ORDER BY started_at DESC, seq DESC LIMIT 1`,
      ),
      lastFinishedCall: this.db.prepare<[string], { id: string }>(
        `SELECT id FROM calls WHERE rollout_id = ? AND prompt_suffix IS NOT NULL ORDER BY started_at DESC, seq DESC LIMIT 1`,
      ),
      listCalls: this.db.prepare<[string], CallRow>('SELECT * FROM calls WHERE rollout_id = ? ORDER BY attempt, seq'),
      insertEvent: this.db.prepare(
        `INSERT INTO events (rollout_id, attempt, type, source, action_id, payload, at)
         VALUES (@rollout_id, @attempt, @type, @source, @action_id, @payload, @at)
         ON CONFLICT DO NOTHING RETURNING *`,
      ),
      insertShadowCall: this.db.prepare(
        `INSERT INTO shadow_calls (id, primary_call_id, rollout_id, attempt, candidate_version, incumbent_version, endpoint,
                                   backend_url, request_sent, conversation_field, conversation_ref, conversation_prefix,
                                   response, completion_ids, logprobs, finish_reasons, status, error_class, error_message,
                                   upstream_status, latency_ms, started_at)
         VALUES (@id, @primary_call_id, @rollout_id, @attempt, @candidate_version, @incumbent_version, @endpoint,
                 @backend_url, @request_sent, @conversation_field, @conversation_ref, @conversation_prefix,
                 @response, @completion_ids, @logprobs, @finish_reasons, @status, @error_class, @error_message,
                 @upstream_status, @latency_ms, @started_at)`,
      ),
      shadowSeq: this.db.prepare<[string], { seq: number }>('SELECT seq FROM shadow_calls WHERE id = ?'),
      eventByAction: this.db.prepare<[string, string], EventRow>('SELECT * FROM events WHERE rollout_id = ? AND action_id = ?'),
      listEvents: this.db.prepare<[string], EventRow>('SELECT * FROM events WHERE rollout_id = ? ORDER BY id'),
      footprint: this.db.prepare<[string], { calls: number; bytes: number | null }>(
        `SELECT COUNT(*) AS calls, SUM(
           LENGTH(request_received) + LENGTH(request_sent_patch) + COALESCE(LENGTH(response), 0)
           + COALESCE(LENGTH(prompt_suffix), 0) + COALESCE(LENGTH(completion_ids), 0) + COALESCE(LENGTH(logprobs), 0)
           + COALESCE(LENGTH(usage), 0) + COALESCE(LENGTH(finish_reasons), 0)) AS bytes
         FROM calls WHERE rollout_id = ?`,
      ),
    };
  }

  async createRollout(input: NewRollout & { id: string }): Promise<{ rollout: Rollout; created: boolean }> {
    const parsed = newRolloutSchema.parse(input);
    const now = Date.now();
    const info = this.statements.insertRollout.run({
      id: input.id,
      task_id: parsed.taskId ?? null,
      mode: parsed.mode,
      keyless: parsed.keyless ? 1 : 0,
      policy_version: parsed.policyVersion ?? null,
      metadata: JSON.stringify(parsed.metadata),
      now,
    });
    this.rolloutCache.delete(input.id);
    const rollout = this.requireRollout(input.id);
    if (info.changes === 0) refuseOtherBody(rollout, parsed);
    return { rollout, created: info.changes === 1 };
  }

  async getRollout(id: string): Promise<Rollout | undefined> {
    const version = this.statements.dataVersion.get() as number;
    if (version !== this.rolloutCacheVersion) {
      // Another connection (another process) committed: anything cached may be stale.
      this.rolloutCache.clear();
      this.rolloutCacheVersion = version;
    }
    let rollout = this.rolloutCache.get(id);
    if (!rollout) {
      const row = this.statements.getRollout.get(id);
      if (!row) return undefined;
      rollout = toRollout(row);
      if (this.rolloutCache.size >= SEQUENCE_CACHE_SIZE) this.rolloutCache.delete(this.rolloutCache.keys().next().value as string);
      this.rolloutCache.set(id, rollout);
    }
    // A copy each time, so callers may keep or change what they get: every field but metadata is a string, number or boolean.
    return { ...rollout, metadata: copyOfMetadata(rollout.metadata) };
  }

  async listRollouts(filter: RolloutFilter = {}): Promise<Page<Rollout>> {
    const limit = Math.min(Math.max(filter.limit ?? 50, 1), 500);
    const where: string[] = [];
    const params: Array<string | number> = [];
    const conditions: Array<[string, string | number | undefined]> = [
      ['status = ?', filter.status],
      ['mode = ?', filter.mode],
      ['task_id = ?', filter.taskId],
      ['seq < ?', filter.after === undefined ? undefined : decodeCursor(filter.after)],
    ];
    for (const [condition, value] of conditions) {
      if (value === undefined) continue;
      where.push(condition);
      params.push(value);
    }
    const rows = this.db
      .prepare<Array<string | number>, RolloutRow>(
        `SELECT * FROM rollouts ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ?`,
      )
      .all(...params, limit + 1);
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return { items: items.map(toRollout), next: rows.length > limit && last ? encodeCursor(last.seq) : null };
  }

  async setRolloutStatus(id: string, change: StatusChange, source: RolloutEvent['source']): Promise<Rollout> {
    const { status, reason = null, failureClass = null, evidence } = statusChangeSchema.parse(change);
    this.rolloutCache.delete(id);
    return this.db.transaction(() => {
      const current = this.requireRollout(id);
      if (!canTransition(current.status, status)) {
        throw new StoreConflictError(
          `rollout ${id} is ${current.status}; it cannot become ${status}` +
            (isFinished(current.status) ? ' (it has finished)' : ''),
        );
      }
      const now = Date.now();
      this.statements.setStatus.run(status, reason, failureClass, now, id);
      this.statements.insertEvent.get({
        rollout_id: id,
        attempt: current.attempts,
        type: 'status',
        source,
        action_id: null,
        payload: JSON.stringify({ from: current.status, to: status, reason, ...(failureClass && { failureClass }), ...(evidence && { evidence }) }),
        at: now,
      });
      if (isFinished(status)) {
        this.lastSequence.delete(id);
        this.lastConversation.delete(id);
      }
      return this.requireRollout(id);
    })();
  }

  async startAttempt(id: string): Promise<Rollout> {
    this.rolloutCache.delete(id);
    return this.db.transaction(() => {
      const current = this.requireRollout(id);
      if (isFinished(current.status)) {
        throw new StoreConflictError(`rollout ${id} has finished (${current.status}); it takes no new attempt`);
      }
      this.statements.startAttempt.run(Date.now(), id);
      return this.requireRollout(id);
    })();
  }

  async reopenRollout(id: string, reason: string): Promise<Rollout> {
    this.rolloutCache.delete(id);
    return this.db.transaction(() => {
      const current = this.requireRollout(id);
      if (!isUnscored(current)) {
        const why = isFinished(current.status) ? `it was scored (${current.status}${current.failureClass ? `, ${current.failureClass}` : ''})` : `it has not finished (${current.status})`;
        throw new StoreConflictError(`rollout ${id} cannot be reopened: ${why}; only a rollout lost to a fault before it was scored runs again`);
      }
      const now = Date.now();
      this.statements.reopen.run(reason, now, id);
      this.statements.insertEvent.get({
        rollout_id: id,
        attempt: current.attempts + 1,
        type: 'status',
        source: 'admin',
        action_id: null,
        payload: JSON.stringify({ from: current.status, to: 'queued', reason, reopened: { failureClass: current.failureClass, reason: current.statusReason } }),
        at: now,
      });
      return this.requireRollout(id);
    })();
  }

  async beginCall(call: CallStart): Promise<{ seq: number }> {
    return this.write(() => this.beginCallNow(call));
  }

  private beginCallNow(call: CallStart): { seq: number } {
    const { row, conversation } = beginCallRow(call, this.conversationBefore(call.rolloutId));
    const { seq } = this.statements.beginCall.get(row) as { seq: number };
    if (conversation) remember(this.lastConversation, call.rolloutId, conversation);
    this.inFlight.set(call.id, call.rolloutId);
    return { seq };
  }

  async markLostCalls(before: number, reason: string): Promise<number> {
    return this.write(() => this.statements.markLostCalls.run(reason, before, before).changes);
  }

  async finishCall(id: string, result: CallFinish): Promise<void> {
    await this.write(() => this.finishCallNow(id, result));
  }

  private finishCallNow(id: string, result: CallFinish): void {
    // Calls begun by this process are known; after a restart, ask the journal.
    const rolloutId = this.inFlight.get(id) ?? this.statements.rolloutOfCall.get(id)?.rollout_id;
    if (!rolloutId) throw new StoreNotFoundError(`call ${id} was never begun`);
    const { row, sequence } = finishCallRow(id, result, this.sequenceBefore(rolloutId));
    this.statements.finishCall.run(row);
    // Only once the row is written: the next prompt of the rollout is stored as a delta over it.
    this.inFlight.delete(id);
    if (sequence) remember(this.lastSequence, rolloutId, sequence);
  }

  async getCall(id: string): Promise<CallRecord | undefined> {
    const row = this.statements.getCall.get(id);
    if (!row) return undefined;
    return new JournalDecoder((ref) => (ref === id ? row : this.statements.getCall.get(ref))).record(row);
  }

  async listCalls(rolloutId: string, attempt?: number): Promise<CallRecord[]> {
    const rows = this.statements.listCalls.all(rolloutId);
    const byId = new Map(rows.map((r) => [r.id, r]));
    const decoder = new JournalDecoder((ref) => byId.get(ref));
    return rows.filter((r) => attempt === undefined || r.attempt === attempt).map((r) => decoder.record(r));
  }

  async recordShadowCall(call: ShadowCallRecord): Promise<void> {
    await this.write(() => this.recordShadowCallNow(call));
  }

  private recordShadowCallNow(call: ShadowCallRecord): void {
    this.statements.insertShadowCall.run(shadowCallRow(call, this.conversationBefore(call.rolloutId)));
  }

  async listShadowCalls(filter: ShadowCallFilter): Promise<ShadowCallRecord[]> {
    let afterSeq: number | undefined;
    if (filter.after !== undefined) {
      afterSeq = this.statements.shadowSeq.get(filter.after)?.seq;
      if (afterSeq === undefined) {
        throw new StoreInputError(`no shadow call "${filter.after}" to continue after; pass the id of the last shadow call of the previous page`);
      }
    }
    const where: string[] = [];
    const params: Array<string | number> = [];
    const conditions: Array<[string, string | number | undefined]> = [
      ['candidate_version = ?', filter.candidate],
      ['rollout_id = ?', filter.rolloutId],
      ['seq > ?', afterSeq],
    ];
    for (const [condition, value] of conditions) {
      if (value === undefined) continue;
      where.push(condition);
      params.push(value);
    }
    const limit = filter.limit === undefined ? -1 : Math.max(filter.limit, 0);
    const rows = this.db
      .prepare<Array<string | number>, ShadowCallRow>(
        `SELECT * FROM shadow_calls ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq LIMIT ?`,
      )
      .all(...params, limit);
    // One decoder for the page: shadow calls of a rollout share its conversation's calls.
    const decoder = new JournalDecoder((ref) => this.statements.getCall.get(ref));
    return rows.map((row) => toShadowCall(row, decoder));
  }

  async appendEvent(
    rolloutId: string,
    attempt: number,
    event: NewEvent,
    source: RolloutEvent['source'],
  ): Promise<RolloutEvent> {
    const { type, ...payload } = event;
    const actionId = event.type === 'span' ? event.actionId : null;
    const inserted = this.statements.insertEvent.get({
      rollout_id: rolloutId,
      attempt,
      type,
      source,
      action_id: actionId,
      payload: JSON.stringify(payload),
      at: Date.now(),
    }) as EventRow | undefined;
    const row = inserted ?? (actionId ? this.statements.eventByAction.get(rolloutId, actionId) : undefined);
    if (!row) throw new Error(`event for rollout ${rolloutId} was not recorded`);
    return toEvent(row);
  }

  async listEvents(rolloutId: string): Promise<RolloutEvent[]> {
    return this.statements.listEvents.all(rolloutId).map(toEvent);
  }

  async rolloutFootprint(rolloutId: string): Promise<{ calls: number; bytes: number }> {
    const row = this.statements.footprint.get(rolloutId);
    return { calls: row?.calls ?? 0, bytes: row?.bytes ?? 0 };
  }

  async listAgedRollouts(before: number, page: { after?: string; limit?: number } = {}): Promise<Page<AgedRollout>> {
    const limit = Math.min(Math.max(page.limit ?? 500, 1), 5000);
    const sql = agedRolloutsSql((c) => `LENGTH(CAST(${c} AS BLOB))`, () => '?');
    const rows = this.db.prepare<[number, number, number], AgedRolloutRow>(sql).all(before, page.after === undefined ? 0 : decodeCursor(page.after), limit + 1);
    return agedRolloutPage(rows, limit);
  }

  async activeBatchIds(since: number): Promise<string[]> {
    const rows = this.db
      .prepare<[number], { batch: string | number }>(
        `SELECT DISTINCT json_extract(metadata, '$.batchId') AS batch FROM rollouts
         WHERE (status NOT IN ${FINISHED_STATUSES_SQL} OR updated_at >= ?) AND json_extract(metadata, '$.batchId') IS NOT NULL`,
      )
      .all(since);
    return rows.map((r) => String(r.batch));
  }

  async deleteFinishedRollouts(ids: readonly string[], before: number): Promise<string[]> {
    const list = JSON.stringify(ids);
    // IMMEDIATE: the write lock first, so no status change slips in between the check and the deletes.
    const deleted = this.db.transaction(() => {
      const doomed = this.db
        .prepare<[string, number], { id: string }>(
          `SELECT id FROM rollouts WHERE id IN (SELECT value FROM json_each(?)) AND status IN ${FINISHED_STATUSES_SQL} AND updated_at < ?`,
        )
        .all(list, before)
        .map((r) => r.id);
      const doomedList = JSON.stringify(doomed);
      for (const table of ['shadow_calls', 'calls', 'events']) {
        this.db.prepare(`DELETE FROM ${table} WHERE rollout_id IN (SELECT value FROM json_each(?))`).run(doomedList);
      }
      this.db.prepare('DELETE FROM rollouts WHERE id IN (SELECT value FROM json_each(?))').run(doomedList);
      return doomed;
    }).immediate();
    for (const id of deleted) this.rolloutCache.delete(id);
    return deleted;
  }

  async close(): Promise<void> {
    // Writes already requested are committed (or fail) before the file closes.
    this.flush();
    this.db.close();
  }

  /** Queues a journal write for the next group commit; resolves once it has committed. */
  private write<T>(run: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Commits the queued writes: together in one transaction, or each alone when that fails. */
  private flush(): void {
    this.flushScheduled = false;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    if (batch.length > 1) {
      let results: unknown[];
      try {
        // IMMEDIATE: the write lock is taken first, so a read in the batch cannot leave it a stale snapshot to upgrade.
        results = this.commitBatch.immediate(batch);
      } catch {
        // Nothing of the batch committed. What its writes taught the caches is forgotten (they
        // rebuild from the journal), and each write is tried alone, so one bad write fails only its own call.
        this.forgetCaches();
        for (const write of batch) this.runAlone(write);
        return;
      }
      batch.forEach((write, i) => write.resolve(results[i]));
      return;
    }
    this.runAlone(batch[0] as PendingWrite);
  }

  private runAlone(write: PendingWrite): void {
    let result: unknown;
    try {
      result = write.run();
    } catch (err) {
      write.reject(err);
      return;
    }
    write.resolve(result);
  }

  private forgetCaches(): void {
    this.lastSequence.clear();
    this.lastConversation.clear();
    // Calls begun in the rolled-back batch are looked up in the journal, where they are not.
    for (const [callId] of this.inFlight) if (!this.statements.rolloutOfCall.get(callId)) this.inFlight.delete(callId);
  }

  private requireRollout(id: string): Rollout {
    const row = this.statements.getRollout.get(id);
    if (!row) throw new StoreNotFoundError(`rollout ${id} not found`);
    return toRollout(row);
  }

  private sequenceBefore(rolloutId: string): SequenceBase | undefined {
    const cached = this.lastSequence.get(rolloutId);
    if (cached) return cached;
    // After a restart: rebuild from the journal.
    const last = this.statements.lastFinishedCall.get(rolloutId);
    if (!last) return undefined;
    return { callId: last.id, ids: new JournalDecoder((ref) => this.statements.getCall.get(ref)).sequence(last.id) };
  }

  private conversationBefore(rolloutId: string): ConversationBase | undefined {
    const cached = this.lastConversation.get(rolloutId);
    if (cached) return cached;
    const last = this.statements.lastConversationCall.get(rolloutId);
    if (!last) return undefined;
    return { callId: last.id, items: new JournalDecoder((ref) => this.statements.getCall.get(ref)).conversation(last.id) };
  }
}


/** Files written before a column existed get it added (SQLite cannot add it in CREATE TABLE IF NOT EXISTS). */
function addMissingColumns(db: Database.Database, table: string, columns: Record<string, string>): void {
  const present = new Set((db.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>).map((c) => c.name));
  for (const [name, type] of Object.entries(columns)) {
    if (!present.has(name)) db.exec(`ALTER TABLE ${table} ADD COLUMN ${name} ${type}`);
  }
}
