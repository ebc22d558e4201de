import type pg from 'pg';
import { canonicalJson } from '../rollouts/harness-spec.js';
import { openMigratedPool, type Migration } from '../store/migrations.js';
import { inTransaction } from '../store/postgres/pool.js';
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
import { announceRegistryChange } from './announce.js';
import { toAliasChange, toDecision, toRecord, type AliasChangeRow, type DecisionRow, type PolicyRow } from './rows.js';

/**
 * The registry's schema on PostgreSQL: the SQLite registry's columns (times in milliseconds, JSON
 * as text), so both read rows with the same code; `seq` keeps the order SQLite's rowid gives.
 */
const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'policies, aliases, alias changes, decisions',
    sql: `
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
];

/**
 * The first key of the transaction-scoped advisory lock an alias move takes (the second is the
 * alias's hash): moves of one alias queue behind each other, also while the alias is unset and
 * there is no row to lock.
 */
const ALIAS_LOCK = 0x616c6961; // "alia"

/** The registry on PostgreSQL, shared by the CLI, the API and workers on any host. */
export class PostgresPolicyRegistry implements PolicyRegistry {
  private constructor(private readonly pool: pg.Pool) {}

  /** Connects, brings the schema up to date, and returns the registry. */
  static async open(url: string): Promise<PostgresPolicyRegistry> {
    // Few connections: the registry is read and written a few times per iteration, not per call.
    return new PostgresPolicyRegistry(await openMigratedPool(url, 'registry', MIGRATIONS, { max: 4 }));
  }

  async register(lineage: PolicyLineage): Promise<PolicyRecord> {
    const inserted = await this.pool.query<PolicyRow>(
      `INSERT INTO policies (version, parent, run_id, iteration, checkpoint_uri, batch_content_hash, trainer_metrics, status, created_at, format, base_checkpoint_uri)
       VALUES ($1, $2, $3, $4, $5, $6, $7, 'candidate', $8, $9, $10) ON CONFLICT (version) DO NOTHING RETURNING *`,
      [
        lineage.version,
        lineage.parent,
        lineage.runId,
        lineage.iteration,
        lineage.checkpointUri,
        lineage.batchContentHash,
        canonicalJson(lineage.trainerMetrics),
        Date.now(),
        lineage.format ?? 'full',
        lineage.baseCheckpointUri ?? null,
      ],
    );
    const row = inserted.rows[0];
    if (row) {
      // Gateways that follow the registry route the new version (see follow.ts).
      await announceRegistryChange(this.pool, `registered ${lineage.version}`);
      return toRecord(row);
    }
    // Registered before (or by a concurrent insert, which ON CONFLICT waited for): the same lineage, or a conflict.
    return sameLineage((await this.get(lineage.version)) as PolicyRecord, lineage);
  }

  async get(version: string): Promise<PolicyRecord | undefined> {
    const row = (await this.pool.query<PolicyRow>('SELECT * FROM policies WHERE version = $1', [version])).rows[0];
    return row && toRecord(row);
  }

  async list(filter: { runId?: string } = {}): Promise<PolicyRecord[]> {
    const { rows } =
      filter.runId === undefined
        ? await this.pool.query<PolicyRow>('SELECT * FROM policies ORDER BY seq')
        : await this.pool.query<PolicyRow>('SELECT * FROM policies WHERE run_id = $1 ORDER BY seq', [filter.runId]);
    return rows.map(toRecord);
  }

  async setStatus(version: string, status: PolicyStatus): Promise<void> {
    await this.pool.query('UPDATE policies SET status = $1 WHERE version = $2', [status, version]);
  }

  async alias(name: string): Promise<string | undefined> {
    return (await this.pool.query<{ version: string }>('SELECT version FROM aliases WHERE alias = $1', [name])).rows[0]?.version;
  }

  async aliases(): Promise<Record<string, string>> {
    const { rows } = await this.pool.query<{ alias: string; version: string }>('SELECT alias, version FROM aliases ORDER BY alias');
    return Object.fromEntries(rows.map((r) => [r.alias, r.version]));
  }

  async setAlias(alias: string, version: string, change: NewAliasChange, options: { expectedFrom?: string | null; statuses?: Record<string, PolicyStatus> } = {}): Promise<AliasChange> {
    return this.transaction(async (db) => {
      // Held until COMMIT: another process's move of this alias waits here, then reads where this one put it.
      await db.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [ALIAS_LOCK, alias]);
      const registered = await db.query('SELECT 1 FROM policies WHERE version = $1', [version]);
      if (registered.rowCount === 0) throw new PolicyConflictError(`policy ${version} is not registered; an alias can only point at a registered version`);
      const from = (await db.query<{ version: string }>('SELECT version FROM aliases WHERE alias = $1', [alias])).rows[0]?.version ?? null;
      if (options.expectedFrom !== undefined && from !== options.expectedFrom) throw new AliasMovedError(alias, options.expectedFrom, from);
      for (const [name, status] of Object.entries(options.statuses ?? {})) await db.query('UPDATE policies SET status = $1 WHERE version = $2', [status, name]);
      await db.query('INSERT INTO aliases (alias, version) VALUES ($1, $2) ON CONFLICT (alias) DO UPDATE SET version = excluded.version', [alias, version]);
      const { rows } = await db.query<AliasChangeRow>(
        'INSERT INTO alias_changes (alias, from_version, to_version, operation, actor, reason, override, decision_id, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *',
        [alias, from, version, change.operation, change.actor, change.reason ?? null, change.override ?? false, change.decisionId ?? null, Date.now()],
      );
      // Delivered at COMMIT, to every gateway that follows the registry: all of them move at once.
      await announceRegistryChange(db, `alias ${alias} ${version}`);
      return toAliasChange(rows[0] as AliasChangeRow);
    });
  }

  async aliasHistory(alias?: string): Promise<AliasChange[]> {
    const { rows } =
      alias === undefined
        ? await this.pool.query<AliasChangeRow>('SELECT * FROM alias_changes ORDER BY id')
        : await this.pool.query<AliasChangeRow>('SELECT * FROM alias_changes WHERE alias = $1 ORDER BY id', [alias]);
    return rows.map(toAliasChange);
  }

  async saveDecision(decision: Omit<StoredDecision, 'createdAt'>): Promise<StoredDecision> {
    await this.pool.query(
      `INSERT INTO decisions (id, candidate, incumbent, verdict, record, created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE
       SET verdict = excluded.verdict, record = excluded.record, created_at = excluded.created_at WHERE decisions.verdict = 'insufficient'`,
      [decision.id, decision.candidate, decision.incumbent, decision.verdict, JSON.stringify(decision.record), Date.now()],
    );
    return (await this.decision(decision.id)) as StoredDecision;
  }

  async decision(id: string): Promise<StoredDecision | undefined> {
    const row = (await this.pool.query<DecisionRow>('SELECT * FROM decisions WHERE id = $1', [id])).rows[0];
    return row && toDecision(row);
  }

  async decisionsFor(candidate: string): Promise<StoredDecision[]> {
    const { rows } = await this.pool.query<DecisionRow>('SELECT * FROM decisions WHERE candidate = $1 ORDER BY created_at DESC, seq DESC', [candidate]);
    return rows.map(toDecision);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  private transaction<T>(work: (db: pg.PoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, work);
  }

}
