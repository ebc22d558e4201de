import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { freshPostgresUrl, storeBackends, type StoreBackend } from '../../test/helpers/postgres.js';
import { applyMigrations, SchemaTooNewError, type Migration } from './migrations.js';
import { openPostgresDatabase, openSqliteDatabase, type SqlDatabase } from './sql/database.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-migrations-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const v1: Migration = {
  version: 1,
  name: 'notes',
  sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)',
};
const v2: Migration = {
  version: 2,
  name: 'note authors',
  sql: "ALTER TABLE notes ADD COLUMN author TEXT NOT NULL DEFAULT 'nobody'",
};

/** One database on either backend, with the three things a test does to it. */
interface TestDatabase {
  migrate(store: string, migrations: Migration[]): Promise<void>;
  query(sql: string): Promise<Array<Record<string, unknown>>>;
  close(): Promise<void>;
}

async function openDatabase(backend: StoreBackend): Promise<TestDatabase> {
  const database =
    backend === 'sqlite'
      ? openSqliteDatabase(path.join(mkdtempSync(path.join(dir, 'db-')), 'store.sqlite'), { pragmas: [] })
      : await openPostgresDatabase(await freshPostgresUrl());
  return testDatabase(database);
}

function testDatabase(database: SqlDatabase): TestDatabase {
  return {
    migrate: (store, migrations) => applyMigrations(database, store, migrations),
    query: async (text) => (await sql.raw<Record<string, unknown>>(text).execute(database.db)).rows,
    close: () => database.close(),
  };
}

describe.each(storeBackends)('schema migrations (%s)', (backend) => {
  it('applies each migration once, in order, and records it per store', async () => {
    const db = await openDatabase(backend);
    try {
      await db.migrate('notes', [v1]);
      await db.migrate('notes', [v1, v2]);
      await db.migrate('notes', [v1, v2]);
      await db.query("INSERT INTO notes (id, text) VALUES (1, 'hello')");
      expect(await db.query('SELECT id, text, author FROM notes')).toEqual([
        { id: 1, text: 'hello', author: 'nobody' },
      ]);
      // Another store in the same database counts its own versions.
      await db.migrate('other', [{ version: 1, name: 'other things', sql: 'CREATE TABLE other_things (id INTEGER)' }]);
      expect(await db.query('SELECT store, version, name FROM rein_schema_migrations ORDER BY store, version')).toEqual(
        [
          { store: 'notes', version: 1, name: 'notes' },
          { store: 'notes', version: 2, name: 'note authors' },
          { store: 'other', version: 1, name: 'other things' },
        ],
      );
    } finally {
      await db.close();
    }
  });

  it('refuses a database a newer Rein migrated, saying to upgrade', async () => {
    const db = await openDatabase(backend);
    try {
      await db.migrate('notes', [v1, v2]);
      const refused = await db.migrate('notes', [v1]).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(SchemaTooNewError);
      expect((refused as Error).message).toMatch(
        /^the database at .+ has schema version 2 of store notes; this Rein knows up to 1: upgrade Rein$/,
      );
      expect((refused as Error).message).not.toContain('rein-test');
    } finally {
      await db.close();
    }
  });

  it('leaves nothing of a migration that fails, and says which one', async () => {
    const db = await openDatabase(backend);
    try {
      const broken: Migration = {
        version: 2,
        name: 'broken',
        sql: 'CREATE TABLE half_done (id INTEGER); SELECT * FROM no_such_table',
      };
      await expect(db.migrate('notes', [v1, broken])).rejects.toThrow(/no_such_table/);
      expect(await db.query("SELECT version FROM rein_schema_migrations WHERE store = 'notes'")).toEqual([
        { version: 1 },
      ]);
      await db.migrate('notes', [v1, { ...broken, sql: 'CREATE TABLE half_done (id INTEGER)' }]);
      expect(
        await db.query("SELECT version FROM rein_schema_migrations WHERE store = 'notes' ORDER BY version"),
      ).toEqual([{ version: 1 }, { version: 2 }]);
    } finally {
      await db.close();
    }
  });
});

describe('schema migrations on PostgreSQL', () => {
  it('runs once when two processes start on a new database at once', async () => {
    const url = await freshPostgresUrl();
    // Two pools: two gateways' connections. Migration 1 would fail the second time (no IF NOT EXISTS).
    const starters = await Promise.all([1, 2, 3].map(() => openPostgresDatabase(url)));
    try {
      await Promise.all(starters.map((database) => applyMigrations(database, 'notes', [v1, v2])));
      expect(
        (await sql`SELECT count(*) AS n FROM rein_schema_migrations WHERE store = 'notes'`.execute(starters[0]!.db))
          .rows,
      ).toEqual([{ n: 2 }]);
    } finally {
      await Promise.all(starters.map((database) => database.close()));
    }
  });

  it('says where the server is and what to check when it cannot be reached, without the password', async () => {
    const migrate = (database: SqlDatabase) => applyMigrations(database, 'notes', [v1]);
    {
      const refused = (await openPostgresDatabase('postgres://rein:hunter2@127.0.0.1:1/rein', { migrate }).then(
        () => new Error('connected'),
        (err: unknown) => err,
      )) as Error;
      expect(refused.message).toMatch(
        /^cannot connect to PostgreSQL at 127\.0\.0\.1:1\/rein: .*ECONNREFUSED.*; the server is unreachable: check that PostgreSQL runs there and that store\.url \(REIN_STORE_URL\) names its host and port$/,
      );
      expect(refused.message).not.toContain('hunter2');
    }
  });

  it('says so when the login or the database is wrong', async () => {
    const url = new URL(await freshPostgresUrl());
    url.password = 'wrong';
    const wrongLogin = url.toString();
    url.password = 'rein-test';
    url.pathname = '/no_such_database';
    const noDatabase = url.toString();
    const migrate = (database: SqlDatabase) => applyMigrations(database, 'notes', [v1]);
    await expect(openPostgresDatabase(wrongLogin, { migrate })).rejects.toThrow(
      /refused the login: check the user and password in store\.url/,
    );
    await expect(openPostgresDatabase(noDatabase, { migrate })).rejects.toThrow(
      /no_such_database.*the database does not exist/,
    );
  });
});
