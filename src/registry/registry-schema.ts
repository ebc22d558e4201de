import type { Generated } from 'kysely';
import type { Migration } from '../store/migrations.js';
import type { AliasChangeRow, DecisionRow, PolicyRow } from './rows.js';

/**
 * The registry's schema. Migration 1 on SQLite is the schema from before versions were recorded,
 * written with IF NOT EXISTS, so a registry made then opens as it is. PostgreSQL has the same
 * columns (times in milliseconds, JSON as text), so both read rows with the same code; its `seq`
 * keeps the order SQLite's rowid gives.
 */
export const REGISTRY_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'policies, aliases, alias changes, decisions',
    sql: {
      sqlite: `
CREATE TABLE IF NOT EXISTS policies (
  version TEXT PRIMARY KEY,
  parent TEXT,
  run_id TEXT,
  iteration INTEGER,
  checkpoint_uri TEXT NOT NULL,
  batch_content_hash TEXT,
  trainer_metrics TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  format TEXT NOT NULL DEFAULT 'full',
  base_checkpoint_uri TEXT
);
CREATE TABLE IF NOT EXISTS aliases (alias TEXT PRIMARY KEY, version TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS alias_changes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  alias TEXT NOT NULL,
  from_version TEXT,
  to_version TEXT NOT NULL,
  operation TEXT NOT NULL,
  actor TEXT NOT NULL,
  reason TEXT,
  override INTEGER NOT NULL,
  decision_id TEXT,
  at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS decisions (
  id TEXT PRIMARY KEY,
  candidate TEXT NOT NULL,
  incumbent TEXT NOT NULL,
  verdict TEXT NOT NULL,
  record TEXT NOT NULL,
  created_at INTEGER NOT NULL
)`,
      postgres: `
CREATE TABLE policies (
  seq BIGSERIAL UNIQUE,
  version TEXT PRIMARY KEY,
  parent TEXT,
  run_id TEXT,
  iteration INTEGER,
  checkpoint_uri TEXT NOT NULL,
  batch_content_hash TEXT,
  trainer_metrics TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  format TEXT NOT NULL DEFAULT 'full',
  base_checkpoint_uri TEXT
);
CREATE INDEX policies_run ON policies(run_id, seq);
CREATE TABLE aliases (alias TEXT PRIMARY KEY, version TEXT NOT NULL);
CREATE TABLE alias_changes (
  id BIGSERIAL PRIMARY KEY,
  alias TEXT NOT NULL,
  from_version TEXT,
  to_version TEXT NOT NULL,
  operation TEXT NOT NULL,
  actor TEXT NOT NULL,
  reason TEXT,
  override BOOLEAN NOT NULL,
  decision_id TEXT,
  at BIGINT NOT NULL
);
CREATE INDEX alias_changes_alias ON alias_changes(alias, id);
CREATE TABLE decisions (
  seq BIGSERIAL UNIQUE,
  id TEXT PRIMARY KEY,
  candidate TEXT NOT NULL,
  incumbent TEXT NOT NULL,
  verdict TEXT NOT NULL,
  record TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX decisions_candidate ON decisions(candidate, created_at, seq);
`,
    },
  },
];

/** The registry's tables as Kysely sees them. */
export interface RegistryTables {
  policies: PolicyRow;
  aliases: { alias: string; version: string };
  alias_changes: Omit<AliasChangeRow, 'id'> & { id: Generated<number | string> };
  decisions: DecisionRow;
}
