import type { StoreLocation } from '../store/location.js';
import { closingAfter, type PolicyRegistry } from './policy-registry.js';
import { PostgresPolicyRegistry } from './postgres-registry.js';
import { registryFile, SqlitePolicyRegistry } from './sqlite-registry.js';

/**
 * Opens the registry where the stores live: the PostgreSQL database when `store.url` is set (so
 * every service on every host sees the same one), else the data directory's SQLite file. The
 * caller closes it.
 */
export async function openRegistry(location: StoreLocation): Promise<PolicyRegistry> {
  return location.postgresUrl ? PostgresPolicyRegistry.open(location.postgresUrl) : new SqlitePolicyRegistry(registryFile(location.dataDir));
}

/** Opens the registry for one piece of work and closes it after. */
export async function withRegistry<T>(location: StoreLocation, use: (registry: PolicyRegistry) => T | Promise<T>): Promise<T> {
  return closingAfter(await openRegistry(location), use);
}
