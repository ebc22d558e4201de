import path from 'node:path';
import { isLocalReference } from '../artifacts/folders.js';
import { sameLineage, type PolicyLineage, type PolicyRecord, type PolicyRegistry } from './policy-registry.js';

/**
 * Checkpoint locations as the registry stores them. A checkpoint under the data directory (the
 * trained versions in dataDir/policies) is stored relative to it, behind DATA_DIR_PREFIX, and
 * resolved against the data directory of whoever reads it, so a data directory moved or restored
 * elsewhere still finds its checkpoints. URIs (s3://, file://) and paths outside the data
 * directory (a base model in the package) are stored as given. Absolute paths a registry stored
 * before are read as they are.
 */
export const DATA_DIR_PREFIX = 'datadir:';

export function storedCheckpointLocation(location: string, dataDir: string): string {
  if (!isLocalReference(location) || location.startsWith('file://') || !path.isAbsolute(location)) return location;
  const relative = path.relative(path.resolve(dataDir), location);
  if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) return location;
  return `${DATA_DIR_PREFIX}${relative.split(path.sep).join('/')}`;
}

export function resolvedCheckpointLocation(stored: string, dataDir: string): string {
  return stored.startsWith(DATA_DIR_PREFIX)
    ? path.join(path.resolve(dataDir), ...stored.slice(DATA_DIR_PREFIX.length).split('/'))
    : stored;
}

/** A registry that stores checkpoint locations relative to `dataDir` and gives them back resolved. */
export function withRelativeCheckpoints(registry: PolicyRegistry, dataDir: string): PolicyRegistry {
  const resolved = (record: PolicyRecord): PolicyRecord => ({
    ...record,
    checkpointUri: resolvedCheckpointLocation(record.checkpointUri, dataDir),
    ...(record.baseCheckpointUri && {
      baseCheckpointUri: resolvedCheckpointLocation(record.baseCheckpointUri, dataDir),
    }),
  });
  const stored = (lineage: PolicyLineage): PolicyLineage => ({
    ...lineage,
    checkpointUri: storedCheckpointLocation(lineage.checkpointUri, dataDir),
    ...(lineage.baseCheckpointUri && {
      baseCheckpointUri: storedCheckpointLocation(lineage.baseCheckpointUri, dataDir),
    }),
  });
  return {
    async register(lineage) {
      // A version registered before (maybe with an absolute path, maybe from another data directory) is compared as
      // read.
      const existing = await registry.get(lineage.version);
      if (existing) return sameLineage(resolved(existing), lineage);
      return resolved(await registry.register(stored(lineage)));
    },
    get: async (version) => {
      const record = await registry.get(version);
      return record && resolved(record);
    },
    list: async (filter) => (await registry.list(filter)).map(resolved),
    setStatus: (version, status) => registry.setStatus(version, status),
    alias: (name) => registry.alias(name),
    aliases: () => registry.aliases(),
    setAlias: (alias, version, change, options) => registry.setAlias(alias, version, change, options),
    aliasHistory: (alias) => registry.aliasHistory(alias),
    saveDecision: (decision) => registry.saveDecision(decision),
    decision: (id) => registry.decision(id),
    decisionsFor: (version, side) => registry.decisionsFor(version, side),
    close: () => registry.close(),
  };
}
