import { randomBytes } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { expect, inject } from 'vitest';
import type { StoreLocation } from '../../src/store/location.js';

/** The stores' backends a contract suite runs on: `describe.each(storeBackends)('… (%s)', (backend) => …)`. */
export const storeBackends = ['sqlite', 'postgres'] as const;
export type StoreBackend = (typeof storeBackends)[number];

/**
 * The backend every Rein service a test starts keeps its stores on, unless the test picks one:
 * `REIN_TEST_STORE=postgres npm test` runs the whole suite with every store on PostgreSQL.
 */
export const suiteStoreBackend: StoreBackend = suiteBackendFrom(process.env.REIN_TEST_STORE);

function suiteBackendFrom(value: string | undefined): StoreBackend {
  if (value === undefined || value === '') return 'sqlite';
  if ((storeBackends as readonly string[]).includes(value)) return value as StoreBackend;
  throw new Error(`REIN_TEST_STORE=${value} is not a store backend: use ${storeBackends.join(' or ')} (unset: sqlite)`);
}

/** A test config's `store` settings on the suite's backend: none for SQLite, a fresh database for PostgreSQL. */
export async function suiteStoreSettings(): Promise<{ store?: { url: string } }> {
  return suiteStoreBackend === 'postgres' ? { store: { url: await freshPostgresUrl() } } : {};
}

/**
 * A new, empty database on the one PostgreSQL server the test run shares (test/global-setup.ts),
 * named after the test file so a leftover is easy to place; returns its postgres:// URL.
 */
export async function freshPostgresUrl(): Promise<string> {
  const adminUrl = inject('postgresAdminUrl');
  const name = `${fileTag()}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Where a test's stores live on `backend`: SQLite files in `dataDir`, or a fresh PostgreSQL database. */
export async function testStoreLocation(backend: StoreBackend, dataDir: string): Promise<StoreLocation> {
  return { dataDir, postgresUrl: backend === 'postgres' ? await freshPostgresUrl() : null };
}

/** The running test file's name as a database name's start: lower case, [a-z0-9_], short. */
function fileTag(): string {
  const testPath = expect.getState().testPath;
  const base = testPath ? path.basename(testPath).replace(/\.test\.ts$/, '') : 'rein';
  return base
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .slice(0, 40);
}
