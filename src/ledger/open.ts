import { closingAfter } from '../registry/policy-registry.js';
import { registryFile } from '../registry/sqlite-registry.js';
import type { StoreLocation } from '../store/location.js';
import type { LedgerStore } from './ledger.js';
import { PostgresLedger } from './postgres-ledger.js';
import { SqliteLedger } from './sqlite-ledger.js';

/**
 * Opens the ledgers where the stores live: the PostgreSQL database when `store.url` is set, else
 * the data directory's SQLite file (the registry's). The caller closes them.
 */
export async function openLedger(location: StoreLocation): Promise<LedgerStore> {
  return location.postgresUrl ? PostgresLedger.open(location.postgresUrl) : new SqliteLedger(registryFile(location.dataDir));
}

/** Opens the ledgers for one piece of work and closes them after. */
export async function withLedger<T>(location: StoreLocation, use: (ledger: LedgerStore) => T | Promise<T>): Promise<T> {
  return closingAfter(await openLedger(location), use);
}
