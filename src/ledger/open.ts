import { closingAfter } from '../registry/policy-registry.js';
import { registryFile } from '../registry/registry-store.js';
import type { StoreLocation } from '../store/location.js';
import type { LedgerStore } from './ledger.js';
import { openPostgresLedger, SqliteLedger } from './ledger-store.js';

/**
 * Opens the ledgers where the stores live: the PostgreSQL database when `store.url` is set, else
 * the data directory's SQLite file (the registry's). The caller closes them.
 */
export async function openLedger(location: StoreLocation): Promise<LedgerStore> {
  if (location.postgresUrl) return openPostgresLedger(location.postgresUrl);
  const ledger = new SqliteLedger(registryFile(location.dataDir));
  await ledger.ready.catch(async (err: unknown) => {
    await ledger.close();
    throw err;
  });
  return ledger;
}

/** Opens the ledgers for one piece of work and closes them after. */
export async function withLedger<T>(location: StoreLocation, use: (ledger: LedgerStore) => T | Promise<T>): Promise<T> {
  return closingAfter(await openLedger(location), use);
}
