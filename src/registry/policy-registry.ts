import path from 'node:path';
import Database from 'better-sqlite3';
import type { Verdict } from '../gate/gate.js';
import { canonicalJson } from '../rollouts/harness-spec.js';
import { makePrivateDatabaseFile } from '../store/private-files.js';

/**
 * Every policy version Rein made or was given, with where it came from: its parent, the run and
 * iteration, the batch it was trained on and the trainer's metrics. Registering is idempotent, so
 * a retried activity finds its version instead of making a second one.
 */
export type PolicyStatus = 'candidate' | 'promoted' | 'rejected' | 'retired';

export interface PolicyLineage {
  version: string;
  /** Null for a base policy Rein did not train. */
  parent: string | null;
  runId: string | null;
  iteration: number | null;
  /** Where the weights are: a checkpoint directory, an object store URI, a model name on the backend. */
  checkpointUri: string;
  batchContentHash: string | null;
  trainerMetrics: Record<string, unknown>;
  /** A full model folder, or a LoRA adapter served on `baseCheckpointUri`. Default full. */
  format?: 'full' | 'lora';
  /** The full base model an adapter applies to; null for full checkpoints. */
  baseCheckpointUri?: string | null;
}

export interface PolicyRecord extends PolicyLineage {
  status: PolicyStatus;
  createdAt: string;
}

export class PolicyConflictError extends Error {}

/** An alias was not where a compare-and-set move expected it. */
export class AliasMovedError extends PolicyConflictError {
  override name = 'AliasMovedError';
  constructor(
    readonly alias: string,
    readonly expected: string | null,
    readonly actual: string | null,
  ) {
    super(`${alias} moved from ${expected ?? 'unset'} to ${actual ?? 'unset'}`);
  }
}

/** A named pointer moved: by hand, by a promotion the gate passed (or an override), or by a rollback. */
export interface AliasChange {
  id: number;
  alias: string;
  /** The version the alias pointed at before; null the first time it was set. */
  from: string | null;
  to: string;
  operation: 'set' | 'promote' | 'rollback';
  /** Who moved it: a run (`run:<id>`), a user (`cli:<user>`), the API. */
  actor: string;
  reason: string | null;
  /** True when a promotion went ahead without a passing gate decision. */
  override: boolean;
  decisionId: string | null;
  at: string;
}

export type NewAliasChange = Pick<AliasChange, 'operation' | 'actor'> & Partial<Pick<AliasChange, 'reason' | 'override' | 'decisionId'>>;

/** Versions from the root to `version`, oldest first (just `version` when the registry does not know it). */
export function lineageOf(registry: Pick<PolicyRegistry, 'get'>, version: string): string[] {
  const chain = [version];
  for (let parent = registry.get(version)?.parent; parent && !chain.includes(parent); parent = registry.get(parent)?.parent) chain.push(parent);
  return chain.reverse();
}

/** A gate decision as stored: the headline fields to find it, the whole record as JSON. */
export interface StoredDecision {
  id: string;
  candidate: string;
  incumbent: string;
  verdict: Verdict;
  record: Record<string, unknown>;
  createdAt: string;
}

interface Row {
  version: string;
  parent: string | null;
  run_id: string | null;
  iteration: number | null;
  checkpoint_uri: string;
  batch_content_hash: string | null;
  trainer_metrics: string;
  status: PolicyStatus;
  created_at: number;
  format: 'full' | 'lora';
  base_checkpoint_uri: string | null;
}

/** The registry (and the ledgers beside it) of a data directory, created on first use. */
export function registryFile(dataDir: string): string {
  const file = path.join(dataDir, 'registry.sqlite');
  makePrivateDatabaseFile(file);
  return file;
}

/** Runs one piece of work with a store and closes it after, also when the work fails. */
export async function closingAfter<R extends { close(): void }, T>(resource: R, use: (resource: R) => T | Promise<T>): Promise<T> {
  try {
    return await use(resource);
  } finally {
    resource.close();
  }
}

/** Opens the data directory's registry for one piece of work and closes it after. */
export function withRegistry<T>(dataDir: string, use: (registry: PolicyRegistry) => T | Promise<T>): Promise<T> {
  return closingAfter(new PolicyRegistry(registryFile(dataDir)), use);
}

export class PolicyRegistry {
  private readonly db: Database.Database;

  constructor(file: string) {
    makePrivateDatabaseFile(file);
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(`CREATE TABLE IF NOT EXISTS policies (
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
    )`);
    // Registries made before adapters were recorded gain the columns (their versions are full checkpoints).
    const columns = (this.db.prepare('PRAGMA table_info(policies)').all() as Array<{ name: string }>).map((c) => c.name);
    if (!columns.includes('format')) this.db.exec("ALTER TABLE policies ADD COLUMN format TEXT NOT NULL DEFAULT 'full'");
    if (!columns.includes('base_checkpoint_uri')) this.db.exec('ALTER TABLE policies ADD COLUMN base_checkpoint_uri TEXT');
  }

  /** Registers a candidate; the same lineage again returns the record, a different one is a conflict. */
  register(lineage: PolicyLineage): PolicyRecord {
    return this.db.transaction(() => {
      const existing = this.get(lineage.version);
      if (existing) {
        const same = (['parent', 'runId', 'iteration', 'checkpointUri', 'batchContentHash'] as const).every((k) => existing[k] === lineage[k]);
        if (!same) {
          throw new PolicyConflictError(
            `policy ${lineage.version} is already registered from ${existing.parent ?? 'no parent'} / batch ${existing.batchContentHash ?? 'none'} at ${existing.checkpointUri}; a version names one policy`,
          );
        }
        return existing;
      }
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
      return this.get(lineage.version) as PolicyRecord;
    })();
  }

  get(version: string): PolicyRecord | undefined {
    const row = this.db.prepare('SELECT * FROM policies WHERE version = ?').get(version) as Row | undefined;
    return row && toRecord(row);
  }

  list(filter: { runId?: string } = {}): PolicyRecord[] {
    const rows = (filter.runId === undefined
      ? this.db.prepare('SELECT * FROM policies ORDER BY rowid').all()
      : this.db.prepare('SELECT * FROM policies WHERE run_id = ? ORDER BY rowid').all(filter.runId)) as Row[];
    return rows.map(toRecord);
  }

  setStatus(version: string, status: PolicyStatus): void {
    this.db.prepare('UPDATE policies SET status = ? WHERE version = ?').run(status, version);
  }

  /** The version an alias points at, if it was ever set here. */
  alias(name: string): string | undefined {
    return (this.db.prepare('SELECT version FROM aliases WHERE alias = ?').get(name) as { version: string } | undefined)?.version;
  }

  aliases(): Record<string, string> {
    const rows = this.db.prepare('SELECT alias, version FROM aliases ORDER BY alias').all() as Array<{ alias: string; version: string }>;
    return Object.fromEntries(rows.map((r) => [r.alias, r.version]));
  }

  /**
   * Moves an alias and records who, why and on what evidence, in one transaction that also sets
   * `statuses`. With `expectedFrom`, it moves only if the alias still points there (null: unset)
   * and throws AliasMovedError otherwise: a decision made against one version says nothing about
   * another that another process put there meanwhile.
   */
  setAlias(alias: string, version: string, change: NewAliasChange, options: { expectedFrom?: string | null; statuses?: Record<string, PolicyStatus> } = {}): AliasChange {
    // IMMEDIATE: the alias is read and moved under one write lock, so no other connection moves it in between.
    return this.db.transaction(() => {
      if (!this.get(version)) throw new PolicyConflictError(`policy ${version} is not registered; an alias can only point at a registered version`);
      const from = this.alias(alias) ?? null;
      if (options.expectedFrom !== undefined && from !== options.expectedFrom) throw new AliasMovedError(alias, options.expectedFrom, from);
      for (const [name, status] of Object.entries(options.statuses ?? {})) this.setStatus(name, status);
      this.db.prepare('INSERT INTO aliases VALUES (?, ?) ON CONFLICT(alias) DO UPDATE SET version = excluded.version').run(alias, version);
      const { lastInsertRowid } = this.db
        .prepare('INSERT INTO alias_changes (alias, from_version, to_version, operation, actor, reason, override, decision_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
        .run(alias, from, version, change.operation, change.actor, change.reason ?? null, change.override ? 1 : 0, change.decisionId ?? null, Date.now());
      return this.aliasHistory(alias).find((c) => c.id === Number(lastInsertRowid)) as AliasChange;
    }).immediate();
  }

  /** Changes of one alias (or all), oldest first. */
  aliasHistory(alias?: string): AliasChange[] {
    const rows = (alias === undefined
      ? this.db.prepare('SELECT * FROM alias_changes ORDER BY id').all()
      : this.db.prepare('SELECT * FROM alias_changes WHERE alias = ? ORDER BY id').all(alias)) as AliasChangeRow[];
    return rows.map((r) => ({
      id: r.id,
      alias: r.alias,
      from: r.from_version,
      to: r.to_version,
      operation: r.operation,
      actor: r.actor,
      reason: r.reason,
      override: r.override === 1,
      decisionId: r.decision_id,
      at: new Date(r.at).toISOString(),
    }));
  }

  /**
   * Idempotent by id: a retried gate activity finds the decision it already made. A pass or a fail
   * is final; an `insufficient` one is replaced once the replays are complete enough to decide.
   */
  saveDecision(decision: Omit<StoredDecision, 'createdAt'>): StoredDecision {
    this.db
      .prepare(
        `INSERT INTO decisions VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE
         SET verdict = excluded.verdict, record = excluded.record, created_at = excluded.created_at WHERE decisions.verdict = 'insufficient'`,
      )
      .run(decision.id, decision.candidate, decision.incumbent, decision.verdict, JSON.stringify(decision.record), Date.now());
    return this.decision(decision.id) as StoredDecision;
  }

  decision(id: string): StoredDecision | undefined {
    const row = this.db.prepare('SELECT * FROM decisions WHERE id = ?').get(id) as DecisionRow | undefined;
    return row && toDecision(row);
  }

  /** Decisions about a candidate, newest first. */
  decisionsFor(candidate: string): StoredDecision[] {
    return (this.db.prepare('SELECT * FROM decisions WHERE candidate = ? ORDER BY created_at DESC, rowid DESC').all(candidate) as DecisionRow[]).map(toDecision);
  }

  close(): void {
    this.db.close();
  }
}

interface AliasChangeRow {
  id: number;
  alias: string;
  from_version: string | null;
  to_version: string;
  operation: AliasChange['operation'];
  actor: string;
  reason: string | null;
  override: number;
  decision_id: string | null;
  at: number;
}

interface DecisionRow {
  id: string;
  candidate: string;
  incumbent: string;
  verdict: Verdict;
  record: string;
  created_at: number;
}

function toDecision(row: DecisionRow): StoredDecision {
  return {
    id: row.id,
    candidate: row.candidate,
    incumbent: row.incumbent,
    verdict: row.verdict,
    record: JSON.parse(row.record) as Record<string, unknown>,
    createdAt: new Date(row.created_at).toISOString(),
  };
}

function toRecord(row: Row): PolicyRecord {
  return {
    version: row.version,
    parent: row.parent,
    runId: row.run_id,
    iteration: row.iteration,
    checkpointUri: row.checkpoint_uri,
    batchContentHash: row.batch_content_hash,
    trainerMetrics: JSON.parse(row.trainer_metrics) as Record<string, unknown>,
    format: row.format,
    baseCheckpointUri: row.base_checkpoint_uri,
    status: row.status,
    createdAt: new Date(row.created_at).toISOString(),
  };
}
