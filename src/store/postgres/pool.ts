import pg from 'pg';
import { postgresServer, redactedStoreUrl } from '../location.js';

/** How long a new connection may take; a server that does not answer by then is reported as unreachable. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * int8 (BIGINT, COUNT(*)) as a JavaScript number: pg gives it as a string, since it may exceed
 * 2^53; what Rein stores in it (milliseconds, sequence numbers, byte counts) never does.
 */
const INT8_OID = 20;

const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (text: string) => Number(text)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * Text as PostgreSQL can store it. Its text cannot hold U+0000 (the whole statement is refused),
 * which SQLite keeps and which a harness's task or span id, a status reason or a backend's garbled
 * reply quoted in a call's error may carry: such text keeps U+FFFD, the replacement character, in
 * its place, so no write is lost to it and a lookup by the same text finds what it wrote. JSON
 * columns never hold it raw (JSON.stringify writes it as \u0000).
 */
export function storable<T>(value: T): T {
  if (typeof value === 'string') return (value.includes('\u0000') ? value.replaceAll('\u0000', '\uFFFD') : value) as T;
  return (Array.isArray(value) ? value.map(storable) : value) as T;
}

/** The pool's connections: pg's, with their queries' parameters made storable. */
class StorableTextClient extends pg.Client {
  override query(...args: unknown[]): never {
    const [config, values, ...rest] = args;
    const withValues =
      config !== null &&
      typeof config === 'object' &&
      Array.isArray((config as { values?: unknown }).values) &&
      typeof (config as { submit?: unknown }).submit !== 'function';
    const query = super.query as (...args: unknown[]) => never;
    return query.call(
      this,
      withValues ? { ...config, values: (config as { values: unknown[] }).values.map(storable) } : config,
      storable(values),
      ...rest,
    );
  }
}

/**
 * A connection pool on the database at `url`. Connections name themselves `rein` (unless the
 * URL sets application_name) so they can be told apart in pg_stat_activity. A connection that
 * breaks while idle is dropped from the pool (logged by the caller via `onIdleError`); without a
 * listener pg would crash the process.
 */
export function openPostgresPool(
  url: string,
  options: { max?: number; onIdleError?: (err: Error) => void } = {},
): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    application_name: 'rein',
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
    max: options.max ?? 10,
    types,
    Client: StorableTextClient,
  });
  pool.on('error', (err) => options.onIdleError?.(err));
  return pool;
}

/** host:port/database of a pool's server, for messages: never its password. */
export function postgresWhere(pool: pg.Pool): string {
  const url = (pool.options as pg.PoolConfig).connectionString;
  if (!url) return 'the configured PostgreSQL server';
  try {
    return postgresServer(url);
  } catch {
    return redactedStoreUrl(url);
  }
}

/**
 * A failure to reach or log in to the server as an error that says where and what to do; other
 * errors are returned as they are.
 */
export function explainPostgresError(err: unknown, pool: pg.Pool): unknown {
  if (!(err instanceof Error)) return err;
  const where = postgresWhere(pool);
  const code = (err as { code?: string }).code;
  const fix = (() => {
    if (
      code === 'ECONNREFUSED' ||
      code === 'ENOTFOUND' ||
      code === 'EAI_AGAIN' ||
      code === 'EHOSTUNREACH' ||
      code === 'ETIMEDOUT' ||
      /timeout/i.test(err.message)
    ) {
      return 'the server is unreachable: check that PostgreSQL runs there and that store.url (REIN_STORE_URL) names its host and port';
    }
    if (code === '28P01' || code === '28000')
      return 'the server refused the login: check the user and password in store.url (REIN_STORE_URL)';
    if (code === '3D000')
      return 'the database does not exist: create it (CREATE DATABASE) or name an existing one in store.url (REIN_STORE_URL)';
    return undefined;
  })();
  if (!fix) return err;
  return new Error(`cannot connect to PostgreSQL at ${where}: ${err.message}; ${fix}`, { cause: err });
}

/**
 * Runs `work` in one transaction on one connection of the pool: committed if it returns, rolled
 * back if it throws. A connection whose ROLLBACK fails is closed rather than handed back half-way
 * through a transaction.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (db: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch((rollbackFailed: Error) => (broken = rollbackFailed));
    throw err;
  } finally {
    client.release(broken);
  }
}
