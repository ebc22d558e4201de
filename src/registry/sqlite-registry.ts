import path from 'node:path';
import type Database from 'better-sqlite3';
import { openDatabaseFile } from '../store/sqlite-driver.js';
import { canonicalJson } from '../rollouts/harness-spec.js';
import { applySqliteMigrations, type Migration } from '../store/migrations.js';
import {
  AliasMovedError,
  PolicyConflictError,
  sameLineage,
  type AliasChange,
  type NewAliasChange,
  type PolicyLineage,
  type PolicyRecord,
  type PolicyRegistry,
  type PolicyStatus,
  type StoredDecision,
} from './policy-registry.js';
import { toAliasChange, toDecision, toRecord, type AliasChangeRow, type DecisionRow, type PolicyRow } from './rows.js';

/** The SQLite file of a data directory's registry and the ledgers beside it (created when first opened). */
export function registryFile(dataDir: string): string {
  return path.join(dataDir, 'registry.sqlite');
}

/**
 * The registry's schema, one migration per change. Migration 1 is the schema from before versions
 * were recorded, written with IF NOT EXISTS, so a registry made then opens as it is.
 */
const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'policies, aliases, alias changes, decisions',
    sql: `
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
  },
];

/** The registry in an SQLite file: the embedded default, for one machine. */
export class SqlitePolicyRegistry implements PolicyRegistry {
  private readonly db: Database.Database;

  constructor(file: string) {
    this.db = openDatabaseFile(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('busy_timeout = 5000');
    applySqliteMigrations(this.db, 'registry', MIGRATIONS);
    // Registries made before adapters were recorded gain the columns (their versions are full checkpoints).
    const columns = (this.db.prepare('PRAGMA table_info(policies)').all() as Array<{ name: string }>).map((c) => c.name);
    if (!columns.includes('format')) this.db.exec("ALTER TABLE policies ADD COLUMN format TEXT NOT NULL DEFAULT 'full'");
    if (!columns.includes('base_checkpoint_uri')) this.db.exec('ALTER TABLE policies ADD COLUMN base_checkpoint_uri TEXT');
  }

  async register(lineage: PolicyLineage): Promise<PolicyRecord> {
    return this.db.transaction(() => {
      const existing = this.policy(lineage.version);
      if (existing) return sameLineage(existing, lineage);
      this.db
        .prepare(
          'INSERT INTO policies (version, parent, run_id, iteration, checkpoint_uri, batch_content_hash, trainer_metrics, status, created_at, format, base_checkpoint_uri) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        )
        .run(
          lineage.version,
          lineage.parent,
          lineage.runId,
          lineage.iteration,
          lineage.checkpointUri,
          lineage.batchContentHash,
          canonicalJson(lineage.trainerMetrics),
          'candidate',
          Date.now(),
          lineage.format ?? 'full',
          lineage.baseCheckpointUri ?? null,
        );
      return this.policy(lineage.version) as PolicyRecord;
    })();
  }

  async get(version: string): Promise<PolicyRecord | undefined> {
    return this.policy(version);
  }

  async list(filter: { runId?: string } = {}): Promise<PolicyRecord[]> {
    const rows = (filter.runId === undefined
      ? this.db.prepare('SELECT * FROM policies ORDER BY rowid').all()
      : this.db.prepare('SELECT * FROM policies WHERE run_id = ? ORDER BY rowid').all(filter.runId)) as PolicyRow[];
    return rows.map(toRecord);
  }

  async setStatus(version: string, status: PolicyStatus): Promise<void> {
    this.db.prepare('UPDATE policies SET status = ? WHERE version = ?').run(status, version);
  }

  async alias(name: string): Promise<string | undefined> {
    return this.aliasOf(name);
  }

  async aliases(): Promise<Record<string, string>> {
    const rows = this.db.prepare('SELECT alias, version FROM aliases ORDER BY alias').all() as Array<{ alias: string; version: string }>;
    return Object.fromEntries(rows.map((r) => [r.alias, r.version]));
  }

  async setAlias(alias: string, version: string, change: NewAliasChange, options: { expectedFrom?: string | null; statuses?: Record<string, PolicyStatus> } = {}): Promise<AliasChange> {
    // IMMEDIATE: the alias is read and moved under one write lock, so no other connection moves it in between.
    return this.db.transaction(() => {
      if (!this.policy(version)) throw new PolicyConflictError(`policy ${version} is not registered; an alias can only point at a registered version`);
      const from = this.aliasOf(alias) ?? null;
      if (options.expectedFrom !== undefined && from !== options.expectedFrom) throw new AliasMovedError(alias, options.expectedFrom, from);
      const setStatus = this.db.prepare('UPDATE policies SET status = ? WHERE version = ?');
      for (const [name, status] of Object.entries(options.statuses ?? {})) setStatus.run(status, name);
      this.db.prepare('INSERT INTO aliases VALUES (?, ?) ON CONFLICT(alias) DO UPDATE SET version = excluded.version').run(alias, version);
      return toAliasChange(
        this.db
          .prepare('INSERT INTO alias_changes (alias, from_version, to_version, operation, actor, reason, override, decision_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *')
          .get(alias, from, version, change.operation, change.actor, change.reason ?? null, change.override ? 1 : 0, change.decisionId ?? null, Date.now()) as AliasChangeRow,
      );
    }).immediate();
  }

  async aliasHistory(alias?: string): Promise<AliasChange[]> {
    const rows = (alias === undefined
      ? this.db.prepare('SELECT * FROM alias_changes ORDER BY id').all()
      : this.db.prepare('SELECT * FROM alias_changes WHERE alias = ? ORDER BY id').all(alias)) as AliasChangeRow[];
    return rows.map(toAliasChange);
  }

  async saveDecision(decision: Omit<StoredDecision, 'createdAt'>): Promise<StoredDecision> {
    this.db
      .prepare(
        `INSERT INTO decisions VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE
         SET verdict = excluded.verdict, record = excluded.record, created_at = excluded.created_at WHERE decisions.verdict = 'insufficient'`,
      )
      .run(decision.id, decision.candidate, decision.incumbent, decision.verdict, JSON.stringify(decision.record), Date.now());
    return this.decisionById(decision.id) as StoredDecision;
  }

  async decision(id: string): Promise<StoredDecision | undefined> {
    return this.decisionById(id);
  }

  async decisionsFor(candidate: string): Promise<StoredDecision[]> {
    return (this.db.prepare('SELECT * FROM decisions WHERE candidate = ? ORDER BY created_at DESC, rowid DESC').all(candidate) as DecisionRow[]).map(toDecision);
  }

  async close(): Promise<void> {
    this.db.close();
  }

  // Synchronous reads, for use inside better-sqlite3's (synchronous) transactions.
  private policy(version: string): PolicyRecord | undefined {
    const row = this.db.prepare('SELECT * FROM policies WHERE version = ?').get(version) as PolicyRow | undefined;
    return row && toRecord(row);
  }

  private aliasOf(name: string): string | undefined {
    return (this.db.prepare('SELECT version FROM aliases WHERE alias = ?').get(name) as { version: string } | undefined)?.version;
  }

  private decisionById(id: string): StoredDecision | undefined {
    const row = this.db.prepare('SELECT * FROM decisions WHERE id = ?').get(id) as DecisionRow | undefined;
    return row && toDecision(row);
  }
}
