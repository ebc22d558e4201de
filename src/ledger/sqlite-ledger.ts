import type Database from 'better-sqlite3';
import { openDatabaseFile } from '../store/sqlite-driver.js';
import { applySqliteMigrations, type Migration } from '../store/migrations.js';
import { toEntry, type LedgerEntry, type LedgerRow, type LedgerStore } from './ledger.js';

/** The ledgers' schema; migration 1 is the table from before versions were recorded, so ledgers made then open as they are. */
const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'ledger',
    sql: `
CREATE TABLE IF NOT EXISTS ledger (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  run_id TEXT,
  iteration INTEGER,
  decision_id TEXT,
  entry TEXT NOT NULL,
  at INTEGER NOT NULL
)`,
  },
];

/** The ledgers in an SQLite file (the registry's): the embedded default, for one machine. */
export class SqliteLedger implements LedgerStore {
  private readonly db: Database.Database;

  constructor(file: string) {
    this.db = openDatabaseFile(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('busy_timeout = 5000');
    applySqliteMigrations(this.db, 'ledger', MIGRATIONS);
  }

  async record(entry: Omit<LedgerEntry, 'at'>): Promise<LedgerEntry> {
    const { id, kind, runId, iteration, decisionId, ...rest } = entry;
    this.db.prepare('INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING').run(id, kind, runId, iteration, decisionId, JSON.stringify(rest), Date.now());
    return (await this.get(id)) as LedgerEntry;
  }

  async get(id: string): Promise<LedgerEntry | undefined> {
    const row = this.db.prepare('SELECT * FROM ledger WHERE id = ?').get(id) as LedgerRow | undefined;
    return row && toEntry(row);
  }

  async list(filter: { runId?: string; kind?: LedgerEntry['kind'] } = {}): Promise<LedgerEntry[]> {
    const rows = this.db
      .prepare('SELECT * FROM ledger WHERE (@runId IS NULL OR run_id = @runId) AND (@kind IS NULL OR kind = @kind) ORDER BY at, rowid')
      .all({ runId: filter.runId ?? null, kind: filter.kind ?? null }) as LedgerRow[];
    return rows.map(toEntry);
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
