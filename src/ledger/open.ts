import { closingAfter } from '../registry/policy-registry.js';
import { registryFile } from '../registry/sqlite-registry.js';
import type { LedgerStore } from './ledger.js';
import { SqliteLedger } from './sqlite-ledger.js';

/** Opens the data directory's ledgers (beside the registry); the caller closes them. */
export function openLedger(dataDir: string): LedgerStore {
  return new SqliteLedger(registryFile(dataDir));
}

/** Opens the data directory's ledgers for one piece of work and closes them after. */
export function withLedger<T>(dataDir: string, use: (ledger: LedgerStore) => T | Promise<T>): Promise<T> {
  return closingAfter(openLedger(dataDir), use);
}
