import path from 'node:path';

/**
 * Where Rein's stores live: SQLite files in dataDir (the embedded default), or one PostgreSQL
 * database for all of them (traces, registry, decisions, ledgers) when `store.url` is set.
 */
export interface StoreLocation {
  dataDir: string;
  /** postgres://… when the stores live in PostgreSQL; null for SQLite files in dataDir. */
  postgresUrl: string | null;
}

export function storeLocation(config: { dataDir: string; store: { url?: string | undefined } }): StoreLocation {
  return { dataDir: config.dataDir, postgresUrl: config.store.url ?? null };
}

/** The forms `store.url` accepts, for messages. */
export const STORE_URL_FORMS =
  'postgres://user:password@host:5432/database (or postgresql://…); unset for SQLite files in dataDir';

/** What is wrong with a `store.url`, or undefined when it is a PostgreSQL URL Rein can use. */
export function storeUrlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `a URL of the form ${STORE_URL_FORMS}`;
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    return `a PostgreSQL URL (${STORE_URL_FORMS}), not ${parsed.protocol}//…`;
  }
  if (parsed.hostname === '' && !parsed.searchParams.has('host'))
    return `a URL that names the server's host: ${STORE_URL_FORMS}`;
  return undefined;
}

/**
 * The URL with its password replaced by ***, for logs and messages; a text that is not a URL is
 * shown as *** whole, since where its password lies cannot be known.
 */
export function redactedStoreUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return '***';
  }
  if (parsed.password !== '') parsed.password = '***';
  if (parsed.searchParams.has('password')) parsed.searchParams.set('password', '***');
  return parsed.toString();
}

/**
 * What names one set of stores, wherever it is opened from: the PostgreSQL server and database
 * (no user, no password), or the absolute dataDir of SQLite files. Two runs with the same
 * identity share a registry, and so a production alias.
 */
export function storeIdentity(location: StoreLocation): string {
  return location.postgresUrl === null
    ? `sqlite:${path.resolve(location.dataDir)}`
    : `postgres://${postgresServer(location.postgresUrl)}`;
}

/** host:port/database of a PostgreSQL URL, for messages and identity: never its user or password. */
export function postgresServer(url: string): string {
  const parsed = new URL(url);
  const host = parsed.hostname || parsed.searchParams.get('host') || 'localhost';
  return `${host}:${parsed.port || '5432'}${parsed.pathname || '/'}`;
}
