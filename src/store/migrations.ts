import type Database from 'better-sqlite3';
import type pg from 'pg';
import { explainPostgresError, openPostgresPool, postgresWhere } from './postgres/pool.js';

/**
 * One step of a store's schema. Versions of a store count up from 1; a migration, once released,
 * never changes (a later one alters what it made), since databases record that they ran it.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** A database whose schema a newer Rein wrote: this one would misread it. */
export class SchemaTooNewError extends Error {
  constructor(where: string, store: string, version: number, known: number) {
    super(`the database at ${where} has schema version ${version} of store ${store}; this Rein knows up to ${known}: upgrade Rein`);
    this.name = 'SchemaTooNewError';
  }
}

const SQLITE_BOOKKEEPING = `
CREATE TABLE IF NOT EXISTS rein_schema_migrations (
  store TEXT NOT NULL,
  version INTEGER NOT NULL,
  name TEXT NOT NULL,
  applied_at INTEGER NOT NULL,
  PRIMARY KEY (store, version)
)`;

const POSTGRES_BOOKKEEPING = `
CREATE TABLE IF NOT EXISTS rein_schema_migrations (
  store TEXT NOT NULL,
  version INTEGER NOT NULL,
  name TEXT NOT NULL,
  applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (store, version)
)`;

/**
 * The advisory lock every Rein process takes while it migrates (any store): two gateways starting
 * on a new database at once would otherwise both run migration 1.
 */
const MIGRATION_LOCK = 0x5265696e; // "Rein"

/**
 * Brings a SQLite database's `store` up to the last of `migrations`, each in a transaction with
 * its bookkeeping row. Files written before schemas were versioned have the tables but no
 * bookkeeping: migration 1 creates only what is missing (IF NOT EXISTS), so they open as they are.
 */
export function applySqliteMigrations(db: Database.Database, store: string, migrations: Migration[]): void {
  checkMigrations(store, migrations);
  db.exec(SQLITE_BOOKKEEPING);
  const applied = () =>
    new Set(
      (db.prepare('SELECT version FROM rein_schema_migrations WHERE store = ?').all(store) as Array<{ version: number }>).map((r) => r.version),
    );
  refuseNewer(db.name, store, applied(), migrations);
  for (const migration of migrations) {
    // IMMEDIATE takes the write lock first, so another process migrating the same file waits
    // here and then finds the step done.
    db.transaction(() => {
      if (applied().has(migration.version)) return;
      db.exec(migration.sql);
      db.prepare('INSERT INTO rein_schema_migrations (store, version, name, applied_at) VALUES (?, ?, ?, ?)').run(
        store,
        migration.version,
        migration.name,
        Date.now(),
      );
    }).immediate();
  }
}

/**
 * Brings a PostgreSQL database's `store` up to the last of `migrations`, each in a transaction
 * with its bookkeeping row. Processes starting at once serialize on an advisory lock, so each
 * migration runs once.
 */
export async function applyPostgresMigrations(pool: pg.Pool, store: string, migrations: Migration[]): Promise<void> {
  checkMigrations(store, migrations);
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw explainPostgresError(err, pool);
  }
  let broken: Error | undefined;
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await client.query(POSTGRES_BOOKKEEPING);
      const rows = await client.query<{ version: number }>('SELECT version FROM rein_schema_migrations WHERE store = $1', [store]);
      const applied = new Set(rows.rows.map((r) => r.version));
      refuseNewer(postgresWhere(pool), store, applied, migrations);
      for (const migration of migrations) {
        if (applied.has(migration.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(migration.sql);
          await client.query('INSERT INTO rein_schema_migrations (store, version, name) VALUES ($1, $2, $3)', [store, migration.version, migration.name]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => {});
          throw new Error(`migration ${migration.version} (${migration.name}) of store ${store} failed: ${(err as Error).message}`, { cause: err });
        }
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    }
  } catch (err) {
    broken = err as Error;
    throw err;
  } finally {
    // A connection that failed mid-way is closed rather than handed back, so no half state (an
    // open transaction, a held lock) reaches the next user.
    client.release(broken);
  }
}

function checkMigrations(store: string, migrations: Migration[]): void {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`migrations of store ${store} must be numbered 1, 2, 3, … in order; found ${m.version} at position ${i + 1}`);
  });
}

function refuseNewer(where: string, store: string, applied: Set<number>, migrations: Migration[]): void {
  const newest = Math.max(0, ...applied);
  if (newest > migrations.length) throw new SchemaTooNewError(where, store, newest, migrations.length);
}

/** A pool on the database at `url` with `store`'s schema brought up to date; ended again if that fails. */
export async function openMigratedPool(url: string, store: string, migrations: Migration[], options: { max?: number } = {}): Promise<pg.Pool> {
  const pool = openPostgresPool(url, options);
  try {
    await applyPostgresMigrations(pool, store, migrations);
  } catch (err) {
    await pool.end();
    throw err;
  }
  return pool;
}
