import os from 'node:os';
import type { ReinConfig } from '../config/schema.js';
import { redactedStoreUrl, storeLocation, type StoreLocation } from './location.js';
import { PostgresTraceStore } from './postgres-store.js';
import { SqliteTraceStore } from './sqlite-store.js';
import type { JournalRetention, TraceStore } from './trace-store.js';

/**
 * The trace store where the location says: the PostgreSQL database every service shares, else
 * the SQLite file (gateway.traceDb) in this machine's data directory.
 *
 * `gateway` names the gateway writing through it, the same across its restarts (see
 * gatewayInstanceName): on PostgreSQL a gateway that starts ends as lost only its own calls.
 */
export async function openTraceStore(
  location: StoreLocation,
  sqliteFile: string,
  options: { gateway?: string } = {},
): Promise<TraceStore & JournalRetention> {
  if (location.postgresUrl) return PostgresTraceStore.open(location.postgresUrl, options);
  const store = new SqliteTraceStore(sqliteFile);
  // Migrated as it opens: a file this Rein cannot use is refused here, not at the first call.
  await store.ready.catch(async (err: unknown) => {
    await store.close();
    throw err;
  });
  return store;
}

/**
 * A gateway's name in a shared journal: its host and port, which its restarts keep (a pod of a
 * StatefulSet, a service on a VM), and which two gateways running at once never share.
 */
export function gatewayInstanceName(listen: { port: number }): string {
  return `${os.hostname()}:${listen.port}`;
}

/** The trace store the config names (store.url, else gateway.traceDb). */
export function traceStoreFromConfig(
  config: ReinConfig,
  options: { gateway?: string } = {},
): Promise<TraceStore & JournalRetention> {
  return openTraceStore(storeLocation(config), config.gateway.traceDb, options);
}

/** Where the config's trace store is, for people: never a password. */
export function traceStoreDescription(config: ReinConfig): string {
  return config.store.url ? `PostgreSQL ${redactedStoreUrl(config.store.url)}` : config.gateway.traceDb;
}
