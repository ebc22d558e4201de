import type pg from 'pg';
import { openMigratedPool, type Migration } from '../store/migrations.js';
import { toEntry, type LedgerEntry, type LedgerRow, type LedgerStore } from './ledger.js';

/** The ledgers' schema on PostgreSQL: the SQLite table's columns, and `seq` for the order SQLite's rowid gives. */
const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'ledger',
    sql: `
CREATE TABLE ledger (
  seq BIGSERIAL UNIQUE,
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  run_id TEXT,
  iteration INTEGER,
  decision_id TEXT,
  entry TEXT NOT NULL,
  at BIGINT NOT NULL
);
CREATE INDEX ledger_run ON ledger(run_id, at, seq);
`,
  },
];

/** The ledgers on PostgreSQL, shared by workers, the CLI and the API on any host. */
export class PostgresLedger implements LedgerStore {
  private constructor(private readonly pool: pg.Pool) {}

  /** Connects, brings the schema up to date, and returns the ledgers. */
  static async open(url: string): Promise<PostgresLedger> {
    // Few connections: a row is written per iteration and release.
    return new PostgresLedger(await openMigratedPool(url, 'ledger', MIGRATIONS, { max: 2 }));
  }

  async record(entry: Omit<LedgerEntry, 'at'>): Promise<LedgerEntry> {
    const { id, kind, runId, iteration, decisionId, ...rest } = entry;
    await this.pool.query(
      'INSERT INTO ledger (id, kind, run_id, iteration, decision_id, entry, at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING',
      [id, kind, runId, iteration, decisionId, JSON.stringify(rest), Date.now()],
    );
    return (await this.get(id)) as LedgerEntry;
  }

  async get(id: string): Promise<LedgerEntry | undefined> {
    const row = (await this.pool.query<LedgerRow>('SELECT * FROM ledger WHERE id = $1', [id])).rows[0];
    return row && toEntry(row);
  }

  async list(filter: { runId?: string; kind?: LedgerEntry['kind'] } = {}): Promise<LedgerEntry[]> {
    const { rows } = await this.pool.query<LedgerRow>(
      'SELECT * FROM ledger WHERE ($1::text IS NULL OR run_id = $1) AND ($2::text IS NULL OR kind = $2) ORDER BY at, seq',
      [filter.runId ?? null, filter.kind ?? null],
    );
    return rows.map(toEntry);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
