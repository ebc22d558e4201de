import { realpathSync } from 'node:fs';
import type BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery, Kysely, PostgresDialect, sql, type QueryResult, type RawBuilder, type SqlBool } from 'kysely';
import type pg from 'pg';
import { explainPostgresError, openPostgresPool, postgresWhere, storable } from '../postgres/pool.js';
import { openDatabaseFile } from '../sqlite-driver.js';
import { lockOf, preparedOnce, ReinSqliteDialect, type FileLock, type PreparedConnection } from './sqlite-dialect.js';

export type SqlKind = 'sqlite' | 'postgres';

/** What runs a compiled query: a Kysely instance, one of its transactions, or SqlDatabase.hot. */
export interface QueryRunner {
  executeQuery<R>(query: CompiledQuery<R>): Promise<QueryResult<R>>;
}

/**
 * The journal's hot path (a call's begin and finish, the rollout check of every call): compiled
 * queries run as directly as the database allows. On SQLite that is synchronously on the
 * connection, holding the file's lock, since Kysely's executor costs as much per statement as
 * better-sqlite3 takes to run it; on PostgreSQL it is Kysely.
 */
export interface HotPath extends QueryRunner {
  /** Runs `work` in one transaction (IMMEDIATE on SQLite); `work` runs its queries on the runner it is given. */
  transaction<T>(work: (runner: QueryRunner) => Promise<T>): Promise<T>;
}

/**
 * One of Rein's databases, SQLite or PostgreSQL, as every store uses it: a Kysely instance, and
 * the few things that differ between the two, each named here rather than written twice.
 */
export interface SqlDatabase {
  readonly kind: SqlKind;
  // Each store types its own tables on this (see its *-schema.ts).
  readonly db: Kysely<any>;
  /** Where the database is, for messages: a file, or host:port/database (never a password). */
  readonly where: string;
  /** Settles once the schema is up to date; until then every query waits for it (and fails with it). */
  readonly ready: Promise<void>;
  /** Compiled queries run as directly as the database allows (see HotPath). */
  readonly hot: HotPath;
  /**
   * Whether SELECT … FOR UPDATE locks rows (PostgreSQL); SQLite's IMMEDIATE transactions lock the whole file instead.
   */
  readonly rowLocks: boolean;
  /** Text as the database keeps it: PostgreSQL's text cannot hold U+0000 (see storable). */
  storedText<T>(value: T): T;
  /** A boolean as a column that is INTEGER on SQLite and BOOLEAN on PostgreSQL takes it. */
  flag(value: boolean): number | boolean;
  /** `column` is one of `values`, passed as one parameter whatever their number (one statement text, prepared once). */
  isIn(column: string, values: readonly string[]): RawBuilder<SqlBool>;
  /** Runs a script of several statements (a migration) on `db`, this database or a transaction on it. */
  runScript(db: Kysely<any>, script: string): Promise<void>;
  /** A failure to reach or log in to the database as an error that says where and what to do; others as they are. */
  explain(err: unknown): unknown;
  close(): Promise<void>;
}

/** What brings a store's schema up to date on a database (see migrations.ts). */
export type Migrate = (database: SqlDatabase) => Promise<void>;

/**
 * Opens one of Rein's SQLite files (through openDatabaseFile: never a descriptor of Rein's own)
 * with `pragmas`, and migrates it. Returns at once: queries wait for the migration, and `ready`
 * says how it went, so stores can still be made by a plain constructor.
 */
export function openSqliteDatabase(file: string, options: { pragmas: string[]; migrate?: Migrate }): SqlDatabase {
  const raw = openDatabaseFile(file);
  for (const pragma of options.pragmas) raw.pragma(pragma);
  const connection = preparedOnce(raw);
  const lock = lockOf(file === ':memory:' ? file : realpathSync(file));
  // The migration runs on a Kysely of its own over the same connection: the store's waits for it.
  const setup = sqliteDatabase(
    raw,
    new Kysely({ dialect: new ReinSqliteDialect(connection, lock) }),
    Promise.resolve(),
  );
  const ready = options.migrate ? options.migrate(setup) : Promise.resolve();
  // Reported by every query and by `ready`; not an unhandled rejection when nobody asked yet.
  ready.catch(() => {});
  const db = new Kysely({
    dialect: new ReinSqliteDialect(async () => {
      await ready;
      return connection;
    }, lock),
  });
  return sqliteDatabase(raw, db, ready, sqliteHotPath(raw, connection, lock, ready));
}

function sqliteDatabase(
  raw: BetterSqlite3.Database,
  db: Kysely<any>,
  ready: Promise<void>,
  hot: HotPath = kyselyHotPath(db),
): SqlDatabase {
  return {
    kind: 'sqlite',
    db,
    where: raw.name,
    ready,
    hot,
    rowLocks: false,
    storedText: (value) => value,
    flag: (value) => (value ? 1 : 0),
    isIn: (column, values) =>
      sql<SqlBool>`${sql.ref(column)} IN (SELECT value FROM json_each(${JSON.stringify(values)}))`,
    // One connection: a transaction on it is this connection, where exec runs the script.
    runScript: async (_db, script) => void raw.exec(script),
    explain: (err) => err,
    close: async () => {
      await db.destroy().catch(() => {});
      if (raw.open) raw.close();
    },
  };
}

/** A pool of at most `max` connections on the PostgreSQL database at `url`, migrated; closed again if that fails. */
export async function openPostgresDatabase(
  url: string,
  options: { max?: number; migrate?: Migrate } = {},
): Promise<SqlDatabase> {
  const database = postgresDatabase(openPostgresPool(url, { max: options.max }));
  try {
    await options.migrate?.(database);
  } catch (err) {
    await database.close();
    throw err;
  }
  return database;
}

function postgresDatabase(pool: pg.Pool): SqlDatabase {
  const db = new Kysely({ dialect: new PostgresDialect({ pool }) });
  return {
    kind: 'postgres',
    db,
    where: postgresWhere(pool),
    ready: Promise.resolve(),
    hot: kyselyHotPath(db),
    rowLocks: true,
    storedText: storable,
    flag: (value) => value,
    isIn: (column, values) => sql<SqlBool>`${sql.ref(column)} = ANY(${[...values]})`,
    // Without parameters pg sends the simple query protocol, which runs several statements.
    runScript: async (on, script) => void (await sql.raw(script).execute(on)),
    explain: (err) => explainPostgresError(err, pool),
    // Kysely's destroy ends the pool.
    close: () => db.destroy(),
  };
}

/** The hot path through Kysely, for PostgreSQL (where the network round trip outweighs it). */
function kyselyHotPath(db: Kysely<any>): HotPath {
  return {
    executeQuery: (query) => db.executeQuery(query),
    transaction: (work) => db.transaction().execute(work),
  };
}

const BEGIN_IMMEDIATE = CompiledQuery.raw('BEGIN IMMEDIATE');
const COMMIT = CompiledQuery.raw('COMMIT');
const ROLLBACK = CompiledQuery.raw('ROLLBACK');

/**
 * SQLite's hot path: each query, or each transaction's queries, run synchronously on the
 * connection while holding the file's lock (the one Kysely's driver takes, see ReinSqliteDialect),
 * so they never interleave with a Kysely transaction of this process.
 */
function sqliteHotPath(
  raw: BetterSqlite3.Database,
  connection: PreparedConnection,
  lock: FileLock,
  ready: Promise<void>,
): HotPath {
  const runner: QueryRunner = { executeQuery: async (query) => connection.execute(query) };
  let isReady = false;
  ready.then(
    () => (isReady = true),
    () => {},
  );
  const holdingLock = async <T>(work: () => Promise<T>): Promise<T> => {
    await ready;
    await lock.acquire();
    try {
      return await work();
    } finally {
      lock.release();
    }
  };
  return {
    executeQuery: (query) => {
      // Uncontended, the usual case: run at once, without waiting a turn for the lock.
      if (isReady && lock.tryAcquire()) {
        try {
          return Promise.resolve(connection.execute(query));
        } catch (err) {
          return Promise.reject(err as Error);
        } finally {
          lock.release();
        }
      }
      return holdingLock(async () => connection.execute(query));
    },
    transaction: (work) =>
      holdingLock(async () => {
        connection.execute(BEGIN_IMMEDIATE);
        try {
          const result = await work(runner);
          connection.execute(COMMIT);
          return result;
        } catch (err) {
          // SQLite may have rolled back already (a full disk, for one).
          if (raw.inTransaction) connection.execute(ROLLBACK);
          throw err;
        }
      }),
  };
}
