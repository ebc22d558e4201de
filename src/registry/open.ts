import type { StoreLocation } from '../store/location.js';
import { withRelativeCheckpoints } from './checkpoint-location.js';
import { closingAfter, type PolicyRegistry } from './policy-registry.js';
import { openPostgresRegistry, registryFile, SqlitePolicyRegistry } from './registry-store.js';

/**
 * Opens the registry where the stores live: the PostgreSQL database when `store.url` is set (so
 * every service on every host sees the same one), else the data directory's SQLite file. The
 * caller closes it.
 */
export async function openRegistry(location: StoreLocation): Promise<PolicyRegistry> {
  // Checkpoints under the data directory are stored relative to it, so the directory can move (checkpoint-location.ts).
  return withRelativeCheckpoints(await openStoredRegistry(location), location.dataDir);
}

async function openStoredRegistry(location: StoreLocation): Promise<PolicyRegistry> {
  if (location.postgresUrl) return openPostgresRegistry(location.postgresUrl);
  const registry = new SqlitePolicyRegistry(registryFile(location.dataDir));
  await registry.ready.catch(async (err: unknown) => {
    await registry.close();
    throw err;
  });
  return registry;
}

/** Opens the registry for one piece of work and closes it after. */
export async function withRegistry<T>(
  location: StoreLocation,
  use: (registry: PolicyRegistry) => T | Promise<T>,
): Promise<T> {
  return closingAfter(await openRegistry(location), use);
}
