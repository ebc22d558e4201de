import { closingAfter, type PolicyRegistry } from './policy-registry.js';
import { registryFile, SqlitePolicyRegistry } from './sqlite-registry.js';

/** Opens the data directory's registry; the caller closes it. */
export function openRegistry(dataDir: string): PolicyRegistry {
  return new SqlitePolicyRegistry(registryFile(dataDir));
}

/** Opens the data directory's registry for one piece of work and closes it after. */
export function withRegistry<T>(dataDir: string, use: (registry: PolicyRegistry) => T | Promise<T>): Promise<T> {
  return closingAfter(openRegistry(dataDir), use);
}
