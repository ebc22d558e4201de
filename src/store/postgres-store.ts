import type pg from 'pg';
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
import {
  agedRolloutPage,
  agedRolloutsSql,
  beginCallRow,
  decodeCursor,
  FINISHED_STATUSES_SQL,
  encodeCursor,
  finishCallRow,
  JournalDecoder,
  refuseOtherBody,
  remember,
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
import { openMigratedPool, type Migration } from './migrations.js';
import { inTransaction, storable } from './postgres/pool.js';
import type { ConversationBase } from './request-codec.js';
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
 * The journal's schema on PostgreSQL: the SQLite store's tables and column types (booleans as
 * 0/1, blobs as bytea), so both decode rows with the same code. Two additions for many gateways
 * on one database: call_sequences hands out each rollout attempt's call numbers (a row locked by
 * the transaction that takes a number, so two gateways never take the same one), and calls.gateway
 * names the gateway that began a call (a gateway that starts ends only its own lost calls).
 */
const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'rollouts, calls, events, shadow calls',
    sql: `
CREATE TABLE rollouts (
  seq BIGSERIAL PRIMARY KEY,
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
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX rollouts_status ON rollouts(status, seq);
CREATE INDEX rollouts_task ON rollouts(task_id, seq);

CREATE TABLE call_sequences (
  rollout_id TEXT NOT NULL REFERENCES rollouts(id),
  attempt INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  PRIMARY KEY (rollout_id, attempt)
);

CREATE TABLE calls (
  id TEXT PRIMARY KEY,
  rollout_id TEXT NOT NULL REFERENCES rollouts(id),
  attempt INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  gateway TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  policy_version TEXT NOT NULL,
  backend_url TEXT NOT NULL,
  stream INTEGER NOT NULL,
  request_received TEXT NOT NULL,
  request_sent_patch TEXT NOT NULL,
  conversation_field TEXT,
  conversation_ref TEXT,
  conversation_prefix INTEGER,
  started_at BIGINT NOT NULL,
  status TEXT NOT NULL,
  response TEXT,
  prompt_ref TEXT,
  prompt_prefix_length INTEGER,
  prompt_suffix BYTEA,
  completion_ids BYTEA,
  logprobs BYTEA,
  finish_reasons TEXT,
  usage TEXT,
  upstream_status INTEGER,
  error_class TEXT,
  error_message TEXT,
  ttft_ms DOUBLE PRECISION,
  latency_ms DOUBLE PRECISION,
  UNIQUE (rollout_id, attempt, seq)
);
CREATE INDEX calls_in_flight ON calls(gateway, started_at) WHERE status = 'in_flight';

CREATE TABLE events (
  id BIGSERIAL PRIMARY KEY,
  rollout_id TEXT NOT NULL REFERENCES rollouts(id),
  attempt INTEGER NOT NULL,
  type TEXT NOT NULL,
  source TEXT NOT NULL,
  action_id TEXT,
  payload TEXT NOT NULL,
  at BIGINT NOT NULL
);
CREATE INDEX events_rollout ON events(rollout_id, id);
CREATE UNIQUE INDEX events_action ON events(rollout_id, action_id) WHERE action_id IS NOT NULL;

CREATE TABLE shadow_calls (
  seq BIGSERIAL PRIMARY KEY,
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
  completion_ids BYTEA,
  logprobs BYTEA,
  finish_reasons TEXT,
  status TEXT NOT NULL,
  error_class TEXT,
  error_message TEXT,
  upstream_status INTEGER,
  latency_ms DOUBLE PRECISION NOT NULL,
  started_at BIGINT NOT NULL
);
CREATE INDEX shadow_calls_candidate ON shadow_calls(candidate_version, seq);
CREATE INDEX shadow_calls_rollout ON shadow_calls(rollout_id, seq);
`,
  },
];

const BEGIN_CALL = `
WITH next AS (
  INSERT INTO call_sequences AS s (rollout_id, attempt, last_seq) VALUES ($2, $3, 1)
  ON CONFLICT (rollout_id, attempt) DO UPDATE SET last_seq = s.last_seq + 1
  RETURNING last_seq
)
INSERT INTO calls (id, rollout_id, attempt, seq, gateway, endpoint, policy_version, backend_url, stream,
                   request_received, request_sent_patch, conversation_field, conversation_ref, conversation_prefix,
                   started_at, status)
SELECT $1, $2, $3, next.last_seq, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'in_flight' FROM next
RETURNING seq`;

const FINISH_CALL = `
UPDATE calls SET status = $2, response = $3, prompt_ref = $4, prompt_prefix_length = $5, prompt_suffix = $6,
  completion_ids = $7, logprobs = $8, finish_reasons = $9, usage = $10, upstream_status = $11, error_class = $12,
  error_message = $13, ttft_ms = $14, latency_ms = $15
WHERE id = $1`;

const INSERT_SHADOW_CALL = `
INSERT INTO shadow_calls (id, primary_call_id, rollout_id, attempt, candidate_version, incumbent_version, endpoint,
                          backend_url, request_sent, conversation_field, conversation_ref, conversation_prefix,
                          response, completion_ids, logprobs, finish_reasons, status, error_class, error_message,
                          upstream_status, latency_ms, started_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)`;

/** Calls and every earlier call their prompt or conversation refers to, in one query. */
const CALL_CHAINS = `
WITH RECURSIVE chain AS (
  SELECT * FROM calls WHERE id = ANY($1)
  UNION
  SELECT c.* FROM calls c JOIN chain p ON c.id = p.prompt_ref OR c.id = p.conversation_ref
)
SELECT * FROM chain`;

const INSERT_EVENT = `
INSERT INTO events (rollout_id, attempt, type, source, action_id, payload, at) VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT DO NOTHING RETURNING *`;

/**
 * The escapes in JSON that jsonb refuses: U+0000 and a lone surrogate, which JSON.stringify writes
 * as \u0000 and \udXXX and a caller's rollout metadata may hold. Read as \ufffd, one such rollout
 * cannot fail a query over all of them. (Inside an escaped backslash the swap leaves valid JSON too.)
 */
const JSONB_REFUSED_ESCAPE = String.raw`\\u(0000|d[89a-f][0-9a-f]{2})`;

/** A connection in a transaction, or the pool for a statement alone. */
type Queryable = pg.Pool | pg.PoolClient;

/** A journal write, prepared (encoded against the caches) just before its group commit. */
interface PreparedWrite {
  /** Begins take their rollout attempt's call_sequences row: a batch takes those in one order, so two gateways' batches never deadlock. */
  lockKey: string | null;
  run(db: Queryable): Promise<unknown>;
}

interface PendingWrite {
  prepare(): Promise<PreparedWrite>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

export interface PostgresTraceStoreOptions {
  /**
   * Names the gateway writing through this store, the same across its restarts (default
   * "default"): markLostCalls ends only calls this name began, so a gateway that starts leaves
   * the calls of the others sharing the database alone.
   */
  gateway?: string;
}

/**
 * The trace store on PostgreSQL, for several gateways and services on other hosts sharing one
 * journal. Same semantics as the SQLite store: journal writes are group-committed (those
 * requested while one commit runs go together in the next transaction, each promise resolving
 * once it has committed), and a call's sequence number comes from the database, so gateways
 * writing calls of one rollout get unique, ordered numbers.
 *
 * Rollouts are read from the database every time (no cache): a rollout another gateway finished
 * is refused at once, with no notification to wait for.
 */
export class PostgresTraceStore implements TraceStore, JournalRetention {
  private readonly lastSequence = new Map<string, SequenceBase>();
  private readonly lastConversation = new Map<string, ConversationBase>();
  private readonly inFlight = new Map<string, string>();
  private readonly gateway: string;
  private pending: PendingWrite[] = [];
  private flushing: Promise<void> | undefined;

  private constructor(
    private readonly pool: pg.Pool,
    options: PostgresTraceStoreOptions,
  ) {
    this.gateway = options.gateway ?? 'default';
  }

  /** Connects, brings the schema up to date, and returns the store. */
  static async open(url: string, options: PostgresTraceStoreOptions = {}): Promise<PostgresTraceStore> {
    return new PostgresTraceStore(await openMigratedPool(url, 'traces', MIGRATIONS), options);
  }

  async createRollout(input: NewRollout & { id: string }): Promise<{ rollout: Rollout; created: boolean }> {
    const parsed = newRolloutSchema.parse(input);
    const now = Date.now();
    const inserted = await this.pool.query<RolloutRow>(
      `INSERT INTO rollouts (id, task_id, mode, status, status_reason, attempts, keyless, policy_version, metadata, created_at, updated_at)
       VALUES ($1, $2, $3, 'queued', NULL, 1, $4, $5, $6, $7, $7) ON CONFLICT (id) DO NOTHING RETURNING *`,
      [input.id, parsed.taskId ?? null, parsed.mode, parsed.keyless ? 1 : 0, parsed.policyVersion ?? null, JSON.stringify(parsed.metadata), now],
    );
    const row = inserted.rows[0];
    if (row) return { rollout: toRollout(row), created: true };
    const rollout = await this.requireRollout(this.pool, input.id);
    // Compared with what was stored of the same body: text as PostgreSQL keeps it (see storable).
    refuseOtherBody(rollout, { ...parsed, taskId: storable(parsed.taskId), policyVersion: storable(parsed.policyVersion) });
    return { rollout, created: false };
  }

  async getRollout(id: string): Promise<Rollout | undefined> {
    const row = (await this.pool.query<RolloutRow>('SELECT * FROM rollouts WHERE id = $1', [id])).rows[0];
    return row && toRollout(row);
  }

  async listRollouts(filter: RolloutFilter = {}): Promise<Page<Rollout>> {
    const limit = Math.min(Math.max(filter.limit ?? 50, 1), 500);
    const { where, params } = conditions([
      ['status', '=', filter.status],
      ['mode', '=', filter.mode],
      ['task_id', '=', filter.taskId],
      ['seq', '<', filter.after === undefined ? undefined : decodeCursor(filter.after)],
    ]);
    const rows = (
      await this.pool.query<RolloutRow>(`SELECT * FROM rollouts ${where} ORDER BY seq DESC LIMIT $${params.length + 1}`, [...params, limit + 1])
    ).rows;
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return { items: items.map(toRollout), next: rows.length > limit && last ? encodeCursor(last.seq) : null };
  }

  async setRolloutStatus(id: string, change: StatusChange, source: RolloutEvent['source']): Promise<Rollout> {
    const { status, reason = null, failureClass = null, evidence } = statusChangeSchema.parse(change);
    const rollout = await this.transaction(async (client) => {
      const current = await this.requireRollout(client, id, 'FOR NO KEY UPDATE');
      if (!canTransition(current.status, status)) {
        throw new StoreConflictError(
          `rollout ${id} is ${current.status}; it cannot become ${status}` + (isFinished(current.status) ? ' (it has finished)' : ''),
        );
      }
      const now = Date.now();
      const updated = await client.query<RolloutRow>(
        'UPDATE rollouts SET status = $1, status_reason = $2, failure_class = $3, updated_at = $4 WHERE id = $5 RETURNING *',
        [status, reason, failureClass, now, id],
      );
      const payload = { from: current.status, to: status, reason, ...(failureClass && { failureClass }), ...(evidence && { evidence }) };
      await client.query(INSERT_EVENT, [id, current.attempts, 'status', source, null, JSON.stringify(payload), now]);
      return toRollout(updated.rows[0] as RolloutRow);
    });
    if (isFinished(status)) {
      this.lastSequence.delete(id);
      this.lastConversation.delete(id);
    }
    return rollout;
  }

  async startAttempt(id: string): Promise<Rollout> {
    return this.transaction(async (client) => {
      const current = await this.requireRollout(client, id, 'FOR NO KEY UPDATE');
      if (isFinished(current.status)) throw new StoreConflictError(`rollout ${id} has finished (${current.status}); it takes no new attempt`);
      const updated = await client.query<RolloutRow>('UPDATE rollouts SET attempts = attempts + 1, updated_at = $1 WHERE id = $2 RETURNING *', [Date.now(), id]);
      return toRollout(updated.rows[0] as RolloutRow);
    });
  }

  async reopenRollout(id: string, reason: string): Promise<Rollout> {
    return this.transaction(async (client) => {
      const current = await this.requireRollout(client, id, 'FOR NO KEY UPDATE');
      if (!isUnscored(current)) {
        const why = isFinished(current.status)
          ? `it was scored (${current.status}${current.failureClass ? `, ${current.failureClass}` : ''})`
          : `it has not finished (${current.status})`;
        throw new StoreConflictError(`rollout ${id} cannot be reopened: ${why}; only a rollout lost to a fault before it was scored runs again`);
      }
      const now = Date.now();
      const updated = await client.query<RolloutRow>(
        "UPDATE rollouts SET attempts = attempts + 1, status = 'queued', status_reason = $1, failure_class = NULL, updated_at = $2 WHERE id = $3 RETURNING *",
        [reason, now, id],
      );
      const payload = { from: current.status, to: 'queued', reason, reopened: { failureClass: current.failureClass, reason: current.statusReason } };
      await client.query(INSERT_EVENT, [id, current.attempts + 1, 'status', 'admin', null, JSON.stringify(payload), now]);
      return toRollout(updated.rows[0] as RolloutRow);
    });
  }

  async beginCall(call: CallStart): Promise<{ seq: number }> {
    return this.write(async () => {
      const { row, conversation } = beginCallRow(call, await this.conversationBefore(call.rolloutId));
      if (conversation) remember(this.lastConversation, call.rolloutId, conversation);
      this.inFlight.set(call.id, call.rolloutId);
      return {
        lockKey: `${call.rolloutId}\u0000${call.attempt}`,
        run: async (client) => {
          const result = await client.query<{ seq: number }>(BEGIN_CALL, [
            row.id, row.rollout_id, row.attempt, this.gateway, row.endpoint, row.policy_version, row.backend_url, row.stream,
            row.request_received, row.request_sent_patch, row.conversation_field, row.conversation_ref, row.conversation_prefix, row.started_at,
          ]);
          return { seq: (result.rows[0] as { seq: number }).seq };
        },
      };
    });
  }

  async finishCall(id: string, result: CallFinish): Promise<void> {
    await this.write(async () => {
      // Calls begun by this process are known; after a restart, ask the journal.
      const rolloutId = this.inFlight.get(id) ?? (await this.pool.query<{ rollout_id: string }>('SELECT rollout_id FROM calls WHERE id = $1', [id])).rows[0]?.rollout_id;
      if (!rolloutId) throw new StoreNotFoundError(`call ${id} was never begun`);
      const { row, sequence } = finishCallRow(id, result, await this.sequenceBefore(rolloutId));
      this.inFlight.delete(id);
      if (sequence) remember(this.lastSequence, rolloutId, sequence);
      return {
        lockKey: null,
        run: async (client) => {
          const updated = await client.query(FINISH_CALL, [
            row.id, row.status, row.response, row.prompt_ref, row.prompt_prefix_length, row.prompt_suffix, row.completion_ids, row.logprobs,
            row.finish_reasons, row.usage, row.upstream_status, row.error_class, row.error_message, row.ttft_ms, row.latency_ms,
          ]);
          if (updated.rowCount === 0) throw new StoreNotFoundError(`call ${id} was never begun`);
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
    // Only this gateway's: the others sharing the database have calls in flight too.
    const result = await this.pool.query(
      `UPDATE calls SET status = 'error', error_class = 'gateway_lost', error_message = $1, latency_ms = $2 - started_at
       WHERE status = 'in_flight' AND gateway = $3 AND started_at < $2`,
      [reason, before, this.gateway],
    );
    return result.rowCount ?? 0;
  }

  async listCalls(rolloutId: string, attempt?: number): Promise<CallRecord[]> {
    // Every call of the rollout: a call's references point at earlier calls of the same rollout.
    const rows = (await this.pool.query<CallRow>('SELECT * FROM calls WHERE rollout_id = $1 ORDER BY attempt, seq', [rolloutId])).rows;
    const byId = new Map(rows.map((r) => [r.id, r]));
    const decoder = new JournalDecoder((ref) => byId.get(ref));
    return rows.filter((r) => attempt === undefined || r.attempt === attempt).map((r) => decoder.record(r));
  }

  async recordShadowCall(call: ShadowCallRecord): Promise<void> {
    await this.write(async () => {
      const row = shadowCallRow(call, await this.conversationBefore(call.rolloutId));
      return {
        lockKey: null,
        run: (client) =>
          client.query(INSERT_SHADOW_CALL, [
            row.id, row.primary_call_id, row.rollout_id, row.attempt, row.candidate_version, row.incumbent_version, row.endpoint,
            row.backend_url, row.request_sent, row.conversation_field, row.conversation_ref, row.conversation_prefix,
            row.response, row.completion_ids, row.logprobs, row.finish_reasons, row.status, row.error_class, row.error_message,
            row.upstream_status, row.latency_ms, row.started_at,
          ]),
      };
    });
  }

  async listShadowCalls(filter: ShadowCallFilter): Promise<ShadowCallRecord[]> {
    let afterSeq: number | undefined;
    if (filter.after !== undefined) {
      afterSeq = (await this.pool.query<{ seq: number }>('SELECT seq FROM shadow_calls WHERE id = $1', [filter.after])).rows[0]?.seq;
      if (afterSeq === undefined) {
        throw new StoreInputError(`no shadow call "${filter.after}" to continue after; pass the id of the last shadow call of the previous page`);
      }
    }
    const { where, params } = conditions([
      ['candidate_version', '=', filter.candidate],
      ['rollout_id', '=', filter.rolloutId],
      ['seq', '>', afterSeq],
    ]);
    const limit = filter.limit === undefined ? null : Math.max(filter.limit, 0);
    const rows = (
      await this.pool.query<ShadowCallRow>(`SELECT * FROM shadow_calls ${where} ORDER BY seq LIMIT $${params.length + 1}`, [...params, limit])
    ).rows;
    // One load for the page: shadow calls of a rollout share its conversation's calls.
    const calls = await this.callChains(rows.flatMap((r) => (r.conversation_ref ? [r.conversation_ref] : [])));
    const decoder = new JournalDecoder((ref) => calls.get(ref));
    return rows.map((row) => toShadowCall(row, decoder));
  }

  async appendEvent(rolloutId: string, attempt: number, event: NewEvent, source: RolloutEvent['source']): Promise<RolloutEvent> {
    const { type, ...payload } = event;
    const actionId = event.type === 'span' ? event.actionId : null;
    const inserted = await this.pool.query<EventRow>(INSERT_EVENT, [rolloutId, attempt, type, source, actionId, JSON.stringify(payload), Date.now()]);
    const row =
      inserted.rows[0] ??
      (actionId ? (await this.pool.query<EventRow>('SELECT * FROM events WHERE rollout_id = $1 AND action_id = $2', [rolloutId, actionId])).rows[0] : undefined);
    if (!row) throw new Error(`event for rollout ${rolloutId} was not recorded`);
    return toEvent(row);
  }

  async listEvents(rolloutId: string): Promise<RolloutEvent[]> {
    return (await this.pool.query<EventRow>('SELECT * FROM events WHERE rollout_id = $1 ORDER BY id', [rolloutId])).rows.map(toEvent);
  }

  async rolloutFootprint(rolloutId: string): Promise<{ calls: number; bytes: number }> {
    const row = (
      await this.pool.query<{ calls: number; bytes: number | null }>(
        `SELECT COUNT(*) AS calls, SUM(
           octet_length(request_received) + octet_length(request_sent_patch) + COALESCE(octet_length(response), 0)
           + COALESCE(octet_length(prompt_suffix), 0) + COALESCE(octet_length(completion_ids), 0) + COALESCE(octet_length(logprobs), 0)
           + COALESCE(octet_length(usage), 0) + COALESCE(octet_length(finish_reasons), 0))::bigint AS bytes
         FROM calls WHERE rollout_id = $1`,
        [rolloutId],
      )
    ).rows[0];
    return { calls: row?.calls ?? 0, bytes: row?.bytes ?? 0 };
  }

  async listAgedRollouts(before: number, page: { after?: string; limit?: number } = {}): Promise<Page<AgedRollout>> {
    const limit = Math.min(Math.max(page.limit ?? 500, 1), 5000);
    const sql = agedRolloutsSql((c) => `octet_length(${c})`, (n) => `$${n}`);
    const rows = (await this.pool.query<AgedRolloutRow>(sql, [before, page.after === undefined ? 0 : decodeCursor(page.after), limit + 1])).rows;
    return agedRolloutPage(rows, limit);
  }

  async activeBatchIds(since: number): Promise<string[]> {
    const rows = await this.pool.query<{ batch: string }>(
      `SELECT DISTINCT batch FROM (SELECT regexp_replace(metadata, $2, '\\\\ufffd', 'gi')::jsonb->>'batchId' AS batch FROM rollouts
         WHERE status NOT IN ${FINISHED_STATUSES_SQL} OR updated_at >= $1) b WHERE batch IS NOT NULL`,
      [since, JSONB_REFUSED_ESCAPE],
    );
    return rows.rows.map((r) => r.batch);
  }

  async deleteFinishedRollouts(ids: readonly string[], before: number): Promise<string[]> {
    return this.transaction(async (client) => {
      // Locked: a status change or a call being journaled for one of them waits, then finds it gone.
      const doomed = (
        await client.query<{ id: string }>(
          `SELECT id FROM rollouts WHERE id = ANY($1) AND status IN ${FINISHED_STATUSES_SQL} AND updated_at < $2 ORDER BY id FOR UPDATE`,
          [[...ids], before],
        )
      ).rows.map((r) => r.id);
      for (const table of ['shadow_calls', 'calls', 'events', 'call_sequences', 'rollouts']) {
        await client.query(`DELETE FROM ${table} WHERE ${table === 'rollouts' ? 'id' : 'rollout_id'} = ANY($1)`, [doomed]);
      }
      return doomed;
    });
  }

  async close(): Promise<void> {
    // Writes already requested are committed (or fail) before the pool closes.
    while (this.flushing) await this.flushing;
    await this.pool.end();
  }

  /** Queues a journal write for the next group commit; resolves once it has committed. */
  private write<T>(prepare: () => Promise<PreparedWrite>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ prepare, resolve: resolve as (value: unknown) => void, reject });
      // One commit at a time, so a write never commits before one requested earlier (a call's
      // finish before its begin); what arrives meanwhile goes in the next.
      this.flushing ??= this.flush();
    });
  }

  /** Commits what is queued, batch after batch, until nothing is. */
  private async flush(): Promise<void> {
    // Writes requested while the event loop handles this round of I/O join the first batch.
    await new Promise<void>((ready) => setImmediate(ready));
    for (;;) {
      const batch = this.pending;
      this.pending = [];
      if (batch.length === 0) {
        // In the same step as the check: a write queued after it starts the next flush.
        this.flushing = undefined;
        return;
      }
      if (batch.length === 1) {
        await this.commitAlone(batch[0] as PendingWrite);
        continue;
      }
      let results: unknown[];
      try {
        results = await this.commitTogether(batch);
      } catch {
        // Nothing of the batch committed. What its writes taught the caches is forgotten (they
        // rebuild from the journal), and each write is tried alone, so one bad write fails only its own call.
        this.forgetCaches();
        for (const write of batch) await this.commitAlone(write);
        continue;
      }
      batch.forEach((write, i) => write.resolve(results[i]));
    }
  }

  private async commitTogether(batch: PendingWrite[]): Promise<unknown[]> {
    const prepared: PreparedWrite[] = [];
    for (const write of batch) prepared.push(await write.prepare());
    // Begins first, in one order of their rollout attempts; a finish or shadow call may refer to a call begun in the batch.
    const order = prepared
      .map((write, i) => ({ write, i }))
      .sort((a, b) => rank(a.write) - rank(b.write) || (a.write.lockKey ?? '').localeCompare(b.write.lockKey ?? '') || a.i - b.i);
    return this.transaction(async (client) => {
      const results: unknown[] = [];
      for (const { write, i } of order) results[i] = await write.run(client);
      return results;
    });
  }

  private async commitAlone(write: PendingWrite): Promise<void> {
    try {
      const prepared = await write.prepare();
      write.resolve(await prepared.run(this.pool));
    } catch (err) {
      this.forgetCaches();
      write.reject(err);
    }
  }

  private transaction<T>(work: (db: pg.PoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, work);
  }


  private forgetCaches(): void {
    this.lastSequence.clear();
    this.lastConversation.clear();
    // Calls begun in a failed write are looked up in the journal, where they are not.
    this.inFlight.clear();
  }

  /** NO KEY UPDATE: a status change waits for no call being journaled (their foreign keys only share the row's key). */
  private async requireRollout(db: Queryable, id: string, lock: '' | 'FOR NO KEY UPDATE' = ''): Promise<Rollout> {
    const row = (await db.query<RolloutRow>(`SELECT * FROM rollouts WHERE id = $1 ${lock}`, [id])).rows[0];
    if (!row) throw new StoreNotFoundError(`rollout ${id} not found`);
    return toRollout(row);
  }

  /** Rows of the calls with these ids and of every call they refer to, by id. */
  private async callChains(ids: string[]): Promise<Map<string, CallRow>> {
    if (ids.length === 0) return new Map();
    const rows = (await this.pool.query<CallRow>(CALL_CHAINS, [[...new Set(ids)]])).rows;
    return new Map(rows.map((r) => [r.id, r]));
  }

  private async sequenceBefore(rolloutId: string): Promise<SequenceBase | undefined> {
    const cached = this.lastSequence.get(rolloutId);
    if (cached) return cached;
    // After a restart (or a call another gateway journaled): rebuild from the journal.
    const last = await this.latestCall(rolloutId, 'prompt_suffix IS NOT NULL');
    if (!last) return undefined;
    const rows = await this.callChains([last]);
    return { callId: last, ids: new JournalDecoder((ref) => rows.get(ref)).sequence(last) };
  }

  private async conversationBefore(rolloutId: string): Promise<ConversationBase | undefined> {
    const cached = this.lastConversation.get(rolloutId);
    if (cached) return cached;
    const last = await this.latestCall(rolloutId, 'conversation_field IS NOT NULL');
    if (!last) return undefined;
    const rows = await this.callChains([last]);
    return { callId: last, items: new JournalDecoder((ref) => rows.get(ref)).conversation(last) };
  }

  private async latestCall(rolloutId: string, condition: string): Promise<string | undefined> {
    const sql = `SELECT id FROM calls WHERE rollout_id = $1 AND ${condition} ORDER BY started_at DESC, seq DESC LIMIT 1`;
    return (await this.pool.query<{ id: string }>(sql, [rolloutId])).rows[0]?.id;
  }
}

function rank(write: PreparedWrite): number {
  return write.lockKey === null ? 1 : 0;
}

/** A WHERE clause of the conditions whose value is set, with its numbered parameters. */
function conditions(list: Array<[column: string, operator: '=' | '<' | '>', value: string | number | undefined]>): {
  where: string;
  params: Array<string | number>;
} {
  const clauses: string[] = [];
  const params: Array<string | number> = [];
  for (const [column, operator, value] of list) {
    if (value === undefined) continue;
    params.push(value);
    clauses.push(`${column} ${operator} $${params.length}`);
  }
  return { where: clauses.length ? `WHERE ${clauses.join(' AND ')}` : '', params };
}
