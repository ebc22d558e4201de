import type { RunDeps, RunDepsSource } from '../activities/run-deps.js';
import type { ArtifactStore } from '../src/artifacts/artifact-store.js';
import { loadRunConfig, RunConfigError, type RunConfig } from '../src/config/run-config.js';
import type { RolloutSettings } from '../src/config/schema.js';
import { ChatTokenizer } from '../src/tokenizer/chat-tokenizer.js';

/** How this worker paces rollouts, whatever the run: its host's capacity, not a run's result. */
export type RolloutPacing = Pick<RolloutSettings, 'concurrency' | 'launchesPerSecond' | 'dependencyWaitSeconds'>;

export interface StoredRunDepsOptions {
  artifacts: ArtifactStore;
  pacing: RolloutPacing;
  /**
   * The worker's own config: it serves a run with the same hash without a read (same hash, same
   * content), and a rollout set started by hand without any.
   */
  own?: RunConfig;
  /** Runs whose deps are kept loaded (least recently used first out). */
  cacheSize?: number;
}

const DEFAULT_CACHE_SIZE = 32;

/**
 * Each run's deps from its own config, stored in the artifact store under its hash by the client
 * that started it; loaded once per hash and kept (a small LRU), since a run's stages ask again and
 * again. A load that fails is not kept: the next ask tries again.
 */
export function storedRunDeps(options: StoredRunDepsOptions): RunDepsSource & { loaded(): string[] } {
  const cache = new Map<string, Promise<RunDeps>>();
  const limit = options.cacheSize ?? DEFAULT_CACHE_SIZE;
  const load = async (hash: string | undefined): Promise<RunDeps> => {
    if (hash === undefined || hash === options.own?.configHash) {
      if (!options.own)
        throw new RunConfigError(
          'this rollout set names no run config, and the worker has none of its own; start it from a run (`rein train`)',
        );
      return runDepsOf(options.own, options.pacing);
    }
    return runDepsOf(await loadRunConfig(options.artifacts, hash), options.pacing);
  };
  return {
    forRun(hash) {
      const key = hash ?? '';
      const kept = cache.get(key);
      if (kept) {
        cache.delete(key);
        cache.set(key, kept);
        return kept;
      }
      const loading = load(hash);
      cache.set(key, loading);
      // Only a load that worked pushes the oldest out; one that failed is dropped.
      loading.then(
        () => {
          while (cache.size > limit) cache.delete(cache.keys().next().value as string);
        },
        () => cache.get(key) === loading && cache.delete(key),
      );
      return loading;
    },
    loaded: () => [...cache.keys()],
  };
}

/** A run's deps: its config's parts, its rollout rules with the worker's pacing, its tokenizer. */
export function runDepsOf(run: RunConfig, pacing: RolloutPacing): RunDeps {
  const { harness, verifier, environment, samples, gate } = run;
  return {
    configHash: run.configHash,
    ...(harness && { harness }),
    ...(verifier && { verifier }),
    ...(environment && { environment }),
    rollouts: { ...run.rolloutRules, ...pacing },
    samples,
    gate,
    ...(samples.tokenizerDir && { tokenizer: tokenizerOf(run.configHash, samples.tokenizerDir) }),
  };
}

function tokenizerOf(hash: string, dir: string): ChatTokenizer {
  try {
    return ChatTokenizer.fromDirectory(dir);
  } catch (err) {
    throw new RunConfigError(
      `run config ${hash}: samples.tokenizerDir ${dir} cannot be read on this worker (${(err as Error).message}); ` +
        'put the tokenizer at that path here, or start the run from a config whose tokenizerDir this worker has',
    );
  }
}
