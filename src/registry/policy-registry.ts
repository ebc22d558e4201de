import Database from 'better-sqlite3';
import { canonicalJson } from '../rollouts/harness-spec.js';

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
}

export interface PolicyRecord extends PolicyLineage {
  status: PolicyStatus;
  createdAt: string;
}

export class PolicyConflictError extends Error {}

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
}

export class PolicyRegistry {
  private readonly db: Database.Database;

  constructor(file: string) {
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
      created_at INTEGER NOT NULL
    )`);
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
        .prepare('INSERT INTO policies VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
        .run(lineage.version, lineage.parent, lineage.runId, lineage.iteration, lineage.checkpointUri, lineage.batchContentHash, canonicalJson(lineage.trainerMetrics), 'candidate', Date.now());
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

  close(): void {
    this.db.close();
  }
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
    status: row.status,
    createdAt: new Date(row.created_at).toISOString(),
  };
}
