import type BetterSqlite3 from 'better-sqlite3';
import {
  CompiledQuery,
  type QueryResult,
  SqliteDialect,
  SqliteDriver,
  type DatabaseConnection,
  type Driver,
  type SqliteDatabase,
  type SqliteStatement,
} from 'kysely';

/** Statements kept prepared per connection: every statement the stores run, with room to spare. */
const STATEMENT_CACHE_SIZE = 256;

/**
 * Kysely's SQLite dialect over one better-sqlite3 connection, with two changes for Rein:
 *
 * - transactions begin IMMEDIATE: the write lock is taken first, so a transaction that reads and
 *   then writes waits for another process's writer (busy_timeout) instead of failing to upgrade
 *   a stale read snapshot with SQLITE_BUSY;
 * - statements stay prepared, by their SQL text: Kysely's driver prepares each statement each
 *   time it runs, which on the journal's hot path costs as much as running it.
 *
 * - one statement or transaction at a time per file in this process, across all its connections:
 *   a transaction here spans awaits, and a second connection of this process that wrote meanwhile
 *   would wait for SQLite's lock in busy_timeout's synchronous sleep, holding the only thread the
 *   first one needs to finish (better-sqlite3 is synchronous, so serializing them costs nothing).
 *
 * `connection` may be a promise: queries wait for it (the schema being migrated, see sql/database.ts).
 * `lock` is the database file's (see lockOf), shared by all its connections in this process.
 */
export class ReinSqliteDialect extends SqliteDialect {
  constructor(
    private readonly connection: SqliteDatabase | (() => Promise<SqliteDatabase>),
    private readonly lock: FileLock,
  ) {
    super({ database: connection });
  }

  override createDriver(): Driver {
    return new SerializedSqliteDriver({ database: this.connection }, this.lock);
  }
}

class SerializedSqliteDriver extends SqliteDriver {
  constructor(
    config: ConstructorParameters<typeof SqliteDriver>[0],
    private readonly lock: FileLock,
  ) {
    super(config);
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    await this.lock.acquire();
    try {
      return await super.acquireConnection();
    } catch (err) {
      this.lock.release();
      throw err;
    }
  }

  override async releaseConnection(): Promise<void> {
    await super.releaseConnection();
    this.lock.release();
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('BEGIN IMMEDIATE'));
  }
}

/** A first-come, first-served lock, handed straight to the next waiter. */
export class FileLock {
  private held = false;
  private readonly waiting: Array<() => void> = [];

  async acquire(): Promise<void> {
    if (this.tryAcquire()) return;
    await new Promise<void>((granted) => this.waiting.push(granted));
  }

  /** Takes the lock if it is free; false if someone holds it. */
  tryAcquire(): boolean {
    if (this.held) return false;
    this.held = true;
    return true;
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held = false;
  }
}

/** One lock per database file for the whole process; an in-memory database is its own. */
const fileLocks = new Map<string, FileLock>();
export function lockOf(file: string): FileLock {
  if (file === ':memory:') return new FileLock();
  let lock = fileLocks.get(file);
  if (!lock) fileLocks.set(file, (lock = new FileLock()));
  return lock;
}

/** A better-sqlite3 connection whose statements are prepared once, by their SQL text. */
export interface PreparedConnection extends SqliteDatabase {
  /** Runs `query` synchronously, with the result Kysely's driver would give. */
  execute<R>(query: CompiledQuery<R>): QueryResult<R>;
}

/** A better-sqlite3 connection as Kysely's driver sees it, preparing each SQL text once. */
export function preparedOnce(db: BetterSqlite3.Database): PreparedConnection {
  const statements = new Map<string, BetterSqlite3.Statement>();
  const prepare = (sql: string): BetterSqlite3.Statement => {
    let statement = statements.get(sql);
    if (!statement) {
      statement = db.prepare(sql);
      if (statements.size >= STATEMENT_CACHE_SIZE) statements.delete(statements.keys().next().value as string);
      statements.set(sql, statement);
    }
    return statement;
  };
  return {
    close: () => db.close(),
    prepare: (sql) => prepare(sql) as unknown as SqliteStatement,
    execute<R>(query: CompiledQuery<R>): QueryResult<R> {
      const statement = prepare(query.sql);
      if (statement.reader) return { rows: statement.all(query.parameters) as R[] };
      const { changes, lastInsertRowid } = statement.run(query.parameters);
      return { rows: [], numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid) };
    },
  };
}
