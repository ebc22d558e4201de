import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { environmentProblems, type EnvironmentDefinition } from './contract.js';
import { environmentId, moduleHash } from './variant-spec.js';

export interface LoadedEnvironment {
  /** name@version:hash of the module's bytes (see environmentId). */
  id: string;
  module: string;
  definition: EnvironmentDefinition;
}

/** The config names an environment Rein cannot use; the message says which problem and the fix. */
export class EnvironmentLoadError extends Error {}

const loaded = new Map<string, Promise<LoadedEnvironment>>();

/**
 * Imports the environment module once per process and content (a changed file is a new
 * environment, with a new id) and checks it against the contract.
 */
export function loadEnvironment(module: string): Promise<LoadedEnvironment> {
  let bytes: Buffer;
  try {
    bytes = readFileSync(module);
  } catch (err) {
    return Promise.reject(
      new EnvironmentLoadError(`environment.module ${module} cannot be read: ${(err as Error).message}`),
    );
  }
  const hash = moduleHash(bytes);
  const key = `${module}\0${hash}`;
  let entry = loaded.get(key);
  if (!entry) {
    entry = importEnvironment(module, hash);
    loaded.set(key, entry);
    entry.catch(() => loaded.delete(key));
  }
  return entry;
}

async function importEnvironment(module: string, hash: string): Promise<LoadedEnvironment> {
  let exports: { default?: unknown };
  try {
    // The query makes a changed file a new module: import() caches by URL.
    exports = (await import(`${pathToFileURL(module).href}?v=${hash}`)) as {
      default?: unknown;
    };
  } catch (err) {
    throw new EnvironmentLoadError(`environment.module ${module} does not load: ${(err as Error).message}`);
  }
  const problems = environmentProblems(exports.default);
  if (problems.length > 0)
    throw new EnvironmentLoadError(
      `environment.module ${module} is not an environment: ${problems.join('; ')} (see docs/environments.md)`,
    );
  const definition = exports.default as EnvironmentDefinition;
  return { id: environmentId(definition.name, definition.version, hash), module, definition };
}
