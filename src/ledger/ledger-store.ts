import { sql, type Kysely } from 'kysely';
import { migrationsOf, type Migration } from '../store/migrations.js';
import { openPostgresDatabase, openSqliteDatabase, type SqlDatabase } from '../store/sql/database.js';
import { toEntry, type LedgerEntry, type LedgerRow, type LedgerStore } from './ledger.js';

/**
 * The ledgers' schema. Migration 1 on SQLite is the table from before versions were recorded
 * (IF NOT EXISTS), so ledgers made then open as they are; on PostgreSQL the table has `seq` for
 * the order SQLite's rowid gives.
 */
const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'ledger',
    sql: {
      sqlite: `
CREATE TABLE IF NOT EXISTS ledger (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  run_id TEXT,
  iteration INTEGER,
  decision_id TEXT,
  entry TEXT NOT NULL,
  at INTEGER NOT NULL
)`,
      postgres: `
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
  },
];

const migrate = migrationsOf('ledger', MIGRATIONS);

interface LedgerTables {
  ledger: LedgerRow;
}

/** The ledgers on PostgreSQL, shared by workers, the CLI and the API on any host. */
export async function openPostgresLedger(url: string): Promise<SqlLedger> {
  // Few connections: a row is written per iteration and release.
  return new SqlLedger(await openPostgresDatabase(url, { max: 2, migrate }));
}

/** The ledgers on either database. */
export class SqlLedger implements LedgerStore {
  private readonly db: Kysely<LedgerTables>;
  /** The order rows were recorded in, after `at`: SQLite's rowid, PostgreSQL's seq. */
  private readonly recordedOrder: 'rowid' | 'seq';

  constructor(private readonly database: SqlDatabase) {
    this.db = database.db as Kysely<LedgerTables>;
    this.recordedOrder = database.kind === 'sqlite' ? 'rowid' : 'seq';
  }

  /** Settles once the schema is up to date (a SQLite file is migrated as it opens). */
  get ready(): Promise<void> {
    return this.database.ready;
  }

  async record(entry: Omit<LedgerEntry, 'at'>): Promise<LedgerEntry> {
    const { id, kind, runId, iteration, decisionId, ...rest } = entry;
    await this.db
      .insertInto('ledger')
      .values({
        id,
        kind,
        run_id: runId,
        iteration,
        decision_id: decisionId,
        entry: JSON.stringify(rest),
        at: Date.now(),
      })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
    return (await this.get(id)) as LedgerEntry;
  }

  async get(id: string): Promise<LedgerEntry | undefined> {
    const row = await this.db.selectFrom('ledger').selectAll().where('id', '=', id).executeTakeFirst();
    return row && toEntry(row);
  }

  async list(filter: { runId?: string; kind?: LedgerEntry['kind'] } = {}): Promise<LedgerEntry[]> {
    const rows = await this.db
      .selectFrom('ledger')
      .selectAll()
      .$if(filter.runId !== undefined, (q) => q.where('run_id', '=', filter.runId as string))
      .$if(filter.kind !== undefined, (q) => q.where('kind', '=', filter.kind as LedgerEntry['kind']))
      .orderBy('at')
      .orderBy(sql.ref(this.recordedOrder))
      .execute();
    return rows.map(toEntry);
  }

  async close(): Promise<void> {
    await this.database.close();
  }
}

/**
 * The ledgers in the registry's SQLite file: the embedded default, for one machine. Queries wait for the file's
 * migration (see `ready`).
 */
export class SqliteLedger extends SqlLedger {
  constructor(file: string) {
    super(openSqliteDatabase(file, { pragmas: ['journal_mode = WAL', 'busy_timeout = 5000'], migrate }));
  }
}
