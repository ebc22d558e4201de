import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Spaces launches at most `perSecond` apart, in the order they asked. Kubernetes API servers and
 * schedulers throttle bursts of Job creations; a steady rate keeps a large batch from tripping them.
 */
export function launchPacer(perSecond: number | undefined): () => Promise<void> {
  if (perSecond === undefined) return async () => undefined;
  const gapMs = 1000 / perSecond;
  let nextAt = 0;
  return async () => {
    const now = performance.now();
    const at = Math.max(now, nextAt);
    nextAt = at + gapMs;
    if (at > now) await sleep(at - now);
  };
}
