import { setTimeout as sleep } from 'node:timers/promises';

export interface DependencyWaitOptions {
  /** The most a batch waits in all; past it, launches go ahead and their attempts say what failed. */
  maxWaitMs: number;
  /** Told what is being waited for (null when the wait ends), to show in the stage's status. */
  onWaiting?: (problem: string | null) => void;
  signal?: AbortSignal | undefined;
}

/** After a check succeeds, launches within this long do not ask again. */
const FRESH_MS = 2000;
const MAX_DELAY_MS = 15_000;

/**
 * Waits, with backoff and a bound, until `check` reports no problem: the gateway and the
 * backend a rollout needs answer. A short outage then costs a pause instead of the attempts of
 * every rollout launched during it. Concurrent launches share one wait; the waits of a batch
 * share one budget, so a dependency that stays down delays the batch once, not per rollout.
 */
export function dependencyWaiter(check: () => Promise<string[]>, options: DependencyWaitOptions): () => Promise<void> {
  let waiting: Promise<void> | null = null;
  let freshUntil = 0;
  let budgetMs = options.maxWaitMs;
  const waitOnce = async () => {
    const started = performance.now();
    const deadline = started + budgetMs;
    for (let attempt = 1; !options.signal?.aborted; attempt++) {
      const problems = await check().catch((err: unknown) => [(err as Error).message]);
      if (problems.length === 0) {
        freshUntil = performance.now() + FRESH_MS;
        break;
      }
      const delay = Math.min(MAX_DELAY_MS, 500 * 2 ** (attempt - 1));
      if (performance.now() + delay > deadline) break;
      options.onWaiting?.(
        `${problems.join('; ')}; waiting before launching more (try ${attempt}, next in ${(delay / 1000).toFixed(1)} s)`,
      );
      await sleep(delay, undefined, options.signal ? { signal: options.signal } : {}).catch(() => undefined);
    }
    budgetMs = Math.max(0, budgetMs - (performance.now() - started));
    options.onWaiting?.(null);
  };
  return () => {
    if (performance.now() < freshUntil) return Promise.resolve();
    waiting ??= waitOnce().finally(() => {
      waiting = null;
    });
    return waiting;
  };
}
