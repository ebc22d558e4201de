import { sql, type Kysely } from 'kysely';
import type { SqlDatabase, SqlKind } from './sql/database.js';

/**
 * One step of a store's schema. Versions of a store count up from 1; a migration, once released,
 * never changes (a later one alters what it made), since databases record that they ran it. Its
 * SQL is one text for both databases, or one per database where their SQL differs (as migration 1
 * of each store does: those schemas were written per database before the stores were one).
 */
export interface Migration {
  version: number;
  name: string;
  sql: string | Readonly<Record<SqlKind, string>>;
}

/** A database whose schema a newer Rein wrote: this one would misread it. */
export class SchemaTooNewError extends Error {
  constructor(where: string, store: string, version: number, known: number) {
    super(
      `the database at ${where} has schema version ${version} of store ${store}; this Rein knows up to ${known}: upgrade Rein`,
    );
    this.name = 'SchemaTooNewError';
  }
}

/** The table each database records its migrations in (as Rein has always made it there). */
const BOOKKEEPING: Record<SqlKind, string> = {
  sqlite: `
CREATE TABLE IF NOT EXISTS rein_schema_migrations (
  store TEXT NOT NULL,
  version INTEGER NOT NULL,
  name TEXT NOT NULL,
  applied_at INTEGER NOT NULL,
  PRIMARY KEY (store, version)
)`,
  postgres: `
CREATE TABLE IF NOT EXISTS rein_schema_migrations (
  store TEXT NOT NULL,
  version INTEGER NOT NULL,
  name TEXT NOT NULL,
  applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (store, version)
)`,
};

/**
 * The advisory lock every Rein process takes on PostgreSQL while it migrates (any store): two
 * gateways starting on a new database at once would otherwise both run migration 1.
 */
const MIGRATION_LOCK = 0x5265696e; // "Rein"

/**
 * Brings `store`'s schema on `database` up to the last of `migrations`, each in a transaction with
 * its bookkeeping row. Processes starting at once wait for each other: on PostgreSQL on an
 * advisory lock, on SQLite on the write lock each migration's IMMEDIATE transaction takes first,
 * after which it finds the step done. SQLite files written before schemas were versioned have the
 * tables but no bookkeeping: their migration 1 creates only what is missing (IF NOT EXISTS).
 */
export async function applyMigrations(database: SqlDatabase, store: string, migrations: Migration[]): Promise<void> {
  checkMigrations(store, migrations);
  let connected = false;
  try {
    await whileMigrating(database, async (db) => {
      connected = true;
      await database.runScript(db, BOOKKEEPING[database.kind]);
      refuseNewer(database.where, store, await appliedVersions(db, store), migrations);
      for (const migration of migrations) await applyOne(database, db, store, migration);
    });
  } catch (err) {
    // A failure to connect says where the database is and what to check; others are as they are.
    throw connected ? err : database.explain(err);
  }
}

async function applyOne(database: SqlDatabase, db: Kysely<any>, store: string, migration: Migration): Promise<void> {
  try {
    await db.transaction().execute(async (trx) => {
      if ((await appliedVersions(trx, store)).has(migration.version)) return;
      await database.runScript(trx, typeof migration.sql === 'string' ? migration.sql : migration.sql[database.kind]);
      // SQLite's table has no default for applied_at; PostgreSQL's takes now().
      const appliedAt = database.kind === 'sqlite' ? { applied_at: Date.now() } : {};
      await trx
        .insertInto('rein_schema_migrations')
        .values({ store, version: migration.version, name: migration.name, ...appliedAt })
        .execute();
    });
  } catch (err) {
    throw new Error(
      `migration ${migration.version} (${migration.name}) of store ${store} failed: ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/** Runs `work` on one connection, holding PostgreSQL's migration lock on it. */
async function whileMigrating(database: SqlDatabase, work: (db: Kysely<any>) => Promise<void>): Promise<void> {
  if (database.kind === 'sqlite') return work(database.db);
  await database.db.connection().execute(async (db) => {
    await sql`SELECT pg_advisory_lock(${MIGRATION_LOCK})`.execute(db);
    try {
      await work(db);
    } finally {
      await sql`SELECT pg_advisory_unlock(${MIGRATION_LOCK})`.execute(db);
    }
  });
}

async function appliedVersions(db: Kysely<any>, store: string): Promise<Set<number>> {
  const rows = await db.selectFrom('rein_schema_migrations').select('version').where('store', '=', store).execute();
  return new Set(rows.map((r) => Number(r.version)));
}

function checkMigrations(store: string, migrations: Migration[]): void {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1)
      throw new Error(
        `migrations of store ${store} must be numbered 1, 2, 3, … in order; found ${m.version} at position ${i + 1}`,
      );
  });
}

function refuseNewer(where: string, store: string, applied: Set<number>, migrations: Migration[]): void {
  const newest = Math.max(0, ...applied);
  if (newest > migrations.length) throw new SchemaTooNewError(where, store, newest, migrations.length);
}

/** How a store's migrations run when a database opens (the `migrate` of openSqliteDatabase / openPostgresDatabase). */
export function migrationsOf(store: string, migrations: Migration[], after?: (database: SqlDatabase) => Promise<void>) {
  return async (database: SqlDatabase): Promise<void> => {
    await applyMigrations(database, store, migrations);
    await after?.(database);
  };
}

/**
 * SQLite files written before a column existed get it added: a migration 1 written with CREATE
 * TABLE IF NOT EXISTS leaves an older table as it was. (PostgreSQL databases are newer than these columns.)
 */
export async function addMissingSqliteColumns(
  database: SqlDatabase,
  table: string,
  columns: Record<string, string>,
): Promise<void> {
  if (database.kind !== 'sqlite') return;
  const present = new Set(
    (await sql<{ name: string }>`SELECT name FROM pragma_table_info(${table})`.execute(database.db)).rows.map(
      (c) => c.name,
    ),
  );
  for (const [name, type] of Object.entries(columns)) {
    if (!present.has(name)) await database.runScript(database.db, `ALTER TABLE ${table} ADD COLUMN ${name} ${type}`);
  }
}
