import { JOURNAL_MIGRATIONS } from './journal-schema.js';
import { SqlTraceStore } from './journal-store.js';
import { addMissingSqliteColumns, migrationsOf } from './migrations.js';
import { openSqliteDatabase } from './sql/database.js';

// Files written before a column existed get it added (SQLite cannot add it in CREATE TABLE IF NOT EXISTS).
const migrate = migrationsOf('traces', JOURNAL_MIGRATIONS, (database) =>
  addMissingSqliteColumns(database, 'rollouts', { policy_version: 'TEXT', failure_class: 'TEXT' }),
);

/**
 * The embedded trace store: one SQLite file in WAL mode, for one gateway. Queries wait for the
 * file's migration (see `ready`).
 */
export class SqliteTraceStore extends SqlTraceStore {
  constructor(file: string) {
    super(
      openSqliteDatabase(file, {
        pragmas: [
          'journal_mode = WAL',
          // NORMAL in WAL mode: a committed call survives a killed process (not a power cut) without an fsync per call.
          'synchronous = NORMAL',
          'foreign_keys = ON',
          'busy_timeout = 5000',
        ],
        migrate,
      }),
    );
  }
}
