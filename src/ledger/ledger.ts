import Database from 'better-sqlite3';
import { isScored } from '../gate/gate.js';
import type { RolloutFacts } from '../gate/rollout-facts.js';
import { closingAfter, registryFile } from '../registry/policy-registry.js';

/**
 * Three ledgers, one row per iteration and per release, so that a change in results can be put
 * down to what changed: the model (policy version), the harness (its version), or the
 * environment (task set, verifier, environment config).
 */
export interface LedgerKeys {
  model: { policyVersion: string; parent: string | null };
  harness: { version: string };
  environment: { taskSet: string; verifier: string; config: string };
}

export interface LedgerMetrics {
  rollouts: number;
  /** Rollouts lost to a fault before they were scored (absent in entries recorded before it was counted). */
  unscored?: number;
  /** Share of the scored rollouts whose reward reached the accept threshold. */
  acceptedRate: number;
  /** Prompt + completion tokens, summed. */
  tokens: number;
  elapsedSeconds: number;
  toolErrors: number;
  /** Attempts beyond the first. */
  retries: number;
  interventions: number;
  irreversibleFailures: number;
}

export interface LedgerEntry extends LedgerKeys {
  id: string;
  kind: 'iteration' | 'release';
  runId: string | null;
  iteration: number | null;
  /** The gate decision behind a release. */
  decisionId: string | null;
  /** Where the metrics come from: the rollouts' batch ids. */
  batchIds: string[];
  metrics: LedgerMetrics;
  at: string;
}

export function ledgerMetrics(facts: readonly RolloutFacts[], acceptReward: number, elapsedSeconds: number): LedgerMetrics {
  // The gate's rule: a rollout the machinery lost is not a failure of the policy.
  const scored = facts.filter(isScored);
  return {
    rollouts: facts.length,
    unscored: facts.length - scored.length,
    acceptedRate: scored.length === 0 ? 0 : scored.filter((f) => f.reward !== null && f.reward >= acceptReward).length / scored.length,
    tokens: facts.reduce((s, f) => s + f.tokens, 0),
    elapsedSeconds,
    toolErrors: facts.reduce((s, f) => s + f.toolErrors, 0),
    retries: facts.reduce((s, f) => s + Math.max(0, f.attempts - 1), 0),
    interventions: facts.reduce((s, f) => s + f.interventions, 0),
    irreversibleFailures: facts.filter((f) => f.failureClass === 'irreversible').length,
  };
}

export type LedgerName = 'model' | 'harness' | 'environment';

/** Which of the three ledgers differ between two entries, field by field. */
export function ledgerChanges(a: LedgerKeys, b: LedgerKeys): Record<LedgerName, Array<{ field: string; from: unknown; to: unknown }>> {
  const diff = (x: Record<string, unknown>, y: Record<string, unknown>) =>
    Object.keys({ ...x, ...y })
      .filter((k) => x[k] !== y[k])
      .map((field) => ({ field, from: x[field], to: y[field] }));
  return {
    model: diff({ policyVersion: a.model.policyVersion }, { policyVersion: b.model.policyVersion }),
    harness: diff(a.harness, b.harness),
    environment: diff(a.environment, b.environment),
  };
}

interface Row {
  id: string;
  kind: LedgerEntry['kind'];
  run_id: string | null;
  iteration: number | null;
  decision_id: string | null;
  entry: string;
  at: number;
}

/** Opens the data directory's ledgers (beside the registry) for one piece of work and closes them after. */
export function withLedger<T>(dataDir: string, use: (ledger: Ledger) => T | Promise<T>): Promise<T> {
  return closingAfter(new Ledger(registryFile(dataDir)), use);
}

export class Ledger {
  private readonly db: Database.Database;

  constructor(file: string) {
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(`CREATE TABLE IF NOT EXISTS ledger (
      id TEXT PRIMARY KEY,
      kind TEXT NOT NULL,
      run_id TEXT,
      iteration INTEGER,
      decision_id TEXT,
      entry TEXT NOT NULL,
      at INTEGER NOT NULL
    )`);
  }

  /** Idempotent by id: a retried activity records its entry once. */
  record(entry: Omit<LedgerEntry, 'at'>): LedgerEntry {
    const { id, kind, runId, iteration, decisionId, ...rest } = entry;
    this.db.prepare('INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING').run(id, kind, runId, iteration, decisionId, JSON.stringify(rest), Date.now());
    return this.get(id) as LedgerEntry;
  }

  get(id: string): LedgerEntry | undefined {
    const row = this.db.prepare('SELECT * FROM ledger WHERE id = ?').get(id) as Row | undefined;
    return row && toEntry(row);
  }

  list(filter: { runId?: string; kind?: LedgerEntry['kind'] } = {}): LedgerEntry[] {
    const rows = this.db
      .prepare('SELECT * FROM ledger WHERE (@runId IS NULL OR run_id = @runId) AND (@kind IS NULL OR kind = @kind) ORDER BY at, rowid')
      .all({ runId: filter.runId ?? null, kind: filter.kind ?? null }) as Row[];
    return rows.map(toEntry);
  }

  close(): void {
    this.db.close();
  }
}

function toEntry(row: Row): LedgerEntry {
  const rest = JSON.parse(row.entry) as Omit<LedgerEntry, 'id' | 'kind' | 'runId' | 'iteration' | 'decisionId' | 'at'>;
  return { id: row.id, kind: row.kind, runId: row.run_id, iteration: row.iteration, decisionId: row.decision_id, ...rest, at: new Date(row.at).toISOString() };
}
