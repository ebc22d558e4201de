import type { Generated } from 'kysely';
import type { CallRow, EventRow, RolloutRow, ShadowCallRow } from './journal-rows.js';
import type { Migration } from './migrations.js';

/**
 * The journal's schema, one migration per change. Migration 1 differs by database, as the two
 * stores wrote it before they were one: on SQLite it is the schema from before versions were
 * recorded, written with IF NOT EXISTS, so a journal made then opens as it is; on PostgreSQL the
 * same tables and column types (booleans as 0/1, blobs as bytea), so both decode rows with the same
 * code, and two additions for many gateways on one database: call_sequences hands out each rollout
 * attempt's call numbers (a row locked by the transaction that takes a number, so two gateways
 * never take the same one), and calls.gateway names the gateway that began a call (a gateway that
 * starts ends only its own lost calls).
 */
export const JOURNAL_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'rollouts, calls, events, shadow calls',
    sql: {
      sqlite: `
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
`,
      postgres: `
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
  },
  {
    version: 2,
    name: "one verifier's reward per rollout attempt",
    // reward_attempt is set by the store only, on the verifier's (source 'admin') rewards: its
    // own unique key, since action_id is the harness's to choose and could take the slot first.
    // Journals that already hold two for one attempt keep both as evidence; the first holds it.
    sql: `
ALTER TABLE events ADD COLUMN reward_attempt INTEGER;
UPDATE events SET reward_attempt = attempt WHERE id IN (
  SELECT MIN(id) FROM events WHERE type = 'reward' AND source = 'admin' GROUP BY rollout_id, attempt
);
CREATE UNIQUE INDEX events_reward ON events(rollout_id, reward_attempt) WHERE reward_attempt IS NOT NULL;
`,
  },
];

/** The journal's tables as Kysely sees them. */
export interface JournalTables {
  rollouts: Omit<RolloutRow, 'seq'> & { seq: Generated<number> };
  /** `gateway` is PostgreSQL's only (see migration 1). */
  calls: CallRow & { gateway?: string };
  events: Omit<EventRow, 'id'> & { id: Generated<number> };
  shadow_calls: Omit<ShadowCallRow, 'seq'> & { seq: Generated<number> };
  /** PostgreSQL's only (see migration 1). */
  call_sequences: { rollout_id: string; attempt: number; last_seq: number };
}
