import { sql, type Expression, type RawBuilder, type SqlBool } from 'kysely';
import type { SqlKind } from './sql/database.js';
import { parameter } from './sql/precompiled.js';

/**
 * Where the journal's SQL differs between SQLite and PostgreSQL; everything else is written once
 * in journal-store.ts. The differences come from PostgreSQL serving many gateways at once: it numbers
 * calls in a table of its own and knows which gateway began a call.
 */
export interface JournalDialect {
  /**
   * Inserts a call begun (parameters named as beginCallRow's columns, and `gateway`), numbered
   * in its rollout attempt, returning its `seq`.
   */
  beginCall: RawBuilder<{ seq: number }>;
  /** Which of the calls still in flight a gateway that starts ends as lost. */
  lostCallsOf(gateway: string): Expression<SqlBool> | null;
  /** The tables with rows of a rollout, emptied before the rollout's own row is deleted. */
  rolloutTables: ReadonlyArray<'shadow_calls' | 'calls' | 'events' | 'call_sequences'>;
  /** A text or blob column's size as rolloutFootprint has always counted it. */
  footprintLength(column: string): string;
  /** A column's size in bytes, for retention. */
  byteLength(column: string): string;
  /** The batch id (metadata.batchId) of a rollout row, as text, or NULL. */
  batchIdOfMetadata: RawBuilder<string | number | null>;
  /** The numeric `value` of the reward event joined as `reward` (see listRollouts), or NULL. */
  rewardValue: RawBuilder<number | null>;
  /**
   * A counter that changes whenever another connection commits (SQLite's data_version), which
   * lets the store keep rollouts it read; null where there is none (PostgreSQL reads them each time:
   * a rollout another gateway finished is refused at once, with no notification to wait for).
   */
  changeCounter: RawBuilder<{ data_version: number }> | null;
}

const BEGIN_COLUMNS = `id, rollout_id, attempt, seq, endpoint, policy_version, backend_url, stream,
  request_received, request_sent_patch, conversation_field, conversation_ref, conversation_prefix, started_at, status`;

/** The values of a call begun after its id, rollout and attempt (and seq), in BEGIN_COLUMNS' order. */
function beginValues() {
  return sql.join(
    [
      'endpoint',
      'policy_version',
      'backend_url',
      'stream',
      'request_received',
      'request_sent_patch',
      'conversation_field',
      'conversation_ref',
      'conversation_prefix',
      'started_at',
    ].map((name) => sql`${parameter(name)}`),
  );
}

/**
 * JSON escapes that jsonb refuses: U+0000 and a lone surrogate, which JSON.stringify writes as
 * \u0000 and \udXXX and a caller's rollout metadata may hold. Read as \ufffd, one such rollout
 * cannot fail a query over all of them. (Inside an escaped backslash the swap leaves valid JSON too.)
 */
const JSONB_REFUSED_ESCAPE = String.raw`\\u(0000|d[89a-f][0-9a-f]{2})`;

/** The reward event's payload as jsonb (see JSONB_REFUSED_ESCAPE). */
const rewardJson = sql`(regexp_replace(reward.payload, ${JSONB_REFUSED_ESCAPE}, '\\\\ufffd', 'gi')::jsonb)`;

const DIALECTS: Record<SqlKind, JournalDialect> = {
  sqlite: {
    // One gateway per file: the next number is one past the attempt's last.
    beginCall: sql`
      INSERT INTO calls (${sql.raw(BEGIN_COLUMNS)})
      VALUES (${parameter('id')}, ${parameter('rollout_id')}, ${parameter('attempt')},
              (SELECT COALESCE(MAX(seq), 0) + 1 FROM calls WHERE rollout_id = ${parameter('rollout_id')} AND attempt = ${parameter('attempt')}),
              ${beginValues()}, 'in_flight')
      RETURNING seq`,
    lostCallsOf: () => null,
    rolloutTables: ['shadow_calls', 'calls', 'events'],
    footprintLength: (column) => `LENGTH(${column})`,
    byteLength: (column) => `LENGTH(CAST(${column} AS BLOB))`,
    batchIdOfMetadata: sql`json_extract(metadata, '$.batchId')`,
    rewardValue: sql`(CASE WHEN json_type(reward.payload, '$.value') IN ('integer', 'real') THEN json_extract(reward.payload, '$.value') END)`,
    changeCounter: sql`PRAGMA data_version`,
  },
  postgres: {
    // The attempt's call_sequences row, locked until COMMIT, hands out the number.
    beginCall: sql`
      WITH next AS (
        INSERT INTO call_sequences AS s (rollout_id, attempt, last_seq) VALUES (${parameter('rollout_id')}, ${parameter('attempt')}, 1)
        ON CONFLICT (rollout_id, attempt) DO UPDATE SET last_seq = s.last_seq + 1
        RETURNING last_seq
      )
      INSERT INTO calls (${sql.raw(BEGIN_COLUMNS)}, gateway)
      SELECT ${parameter('id')}, ${parameter('rollout_id')}, ${parameter('attempt')}, next.last_seq, ${beginValues()}, 'in_flight', ${parameter('gateway')} FROM next
      RETURNING seq`,
    // Only this gateway's: the others sharing the database have calls in flight too.
    lostCallsOf: (gateway) => sql<SqlBool>`gateway = ${gateway}`,
    rolloutTables: ['shadow_calls', 'calls', 'events', 'call_sequences'],
    footprintLength: (column) => `octet_length(${column})`,
    byteLength: (column) => `octet_length(${column})`,
    batchIdOfMetadata: sql`regexp_replace(metadata, ${JSONB_REFUSED_ESCAPE}, '\\\\ufffd', 'gi')::jsonb->>'batchId'`,
    rewardValue: sql`(CASE WHEN jsonb_typeof(${rewardJson}->'value') = 'number' THEN (${rewardJson}->>'value')::float8 END)`,
    changeCounter: null,
  },
};

export function journalDialect(kind: SqlKind): JournalDialect {
  return DIALECTS[kind];
}
