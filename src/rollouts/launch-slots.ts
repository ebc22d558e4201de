import { hostname } from 'node:os';
import type { GatewayControlClient } from '../gateway/control-client.js';

export interface LaunchSlotOptions {
  /** The harness kind: its version (what harness-spec.ts hashes). */
  kind: string;
  /** Harness processes of the kind running at once at most, across all workers (harness.maxRunning). */
  limit: number;
  /** How long a lease lives unless renewed: a dead worker's slots come back this long after its last renewal. */
  ttlMs?: number;
  /** First wait between tries while every slot is taken (it grows to 10×, with jitter). */
  pollMs?: number;
  /** Told what launches wait for (null when a slot was found), for the stage's status. */
  onWaiting?: (problem: string | null) => void;
  onWarning?: (message: string) => void;
  signal?: AbortSignal | undefined;
}

/** Gives a slot back: stops renewing its lease and deletes it. */
export type ReleaseSlot = () => Promise<void>;

const DEFAULT_TTL_MS = 60_000;
const DEFAULT_POLL_MS = 500;

/**
 * Launch slots of one harness kind, shared by every worker through leases in the store (the
 * gateway's /api/launch-slots): `take` resolves once fewer than `limit` of the kind run, and the
 * lease is renewed every third of its time to live until released. In one runner, waiters are
 * served in arrival order by one loop that asks for them (with backoff while all are taken, and at
 * once when a slot of this runner frees up); waiters on different workers are served as they
 * happen to ask.
 */
export function launchSlots(gateway: GatewayControlClient, options: LaunchSlotOptions): () => Promise<ReleaseSlot> {
  const ttlMs = options.ttlMs ?? DEFAULT_TTL_MS;
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  const request = { kind: options.kind, holder: `${hostname()}:${process.pid}`, limit: options.limit, ttlMs };
  const waiters: Array<{ resolve: (release: ReleaseSlot) => void; reject: (err: unknown) => void }> = [];
  let wake: (() => void) | undefined;
  let asking = false;
  const granted = (leaseId: string): ReleaseSlot => {
    const stop = renewing(gateway, leaseId, ttlMs, options.onWarning);
    return async () => {
      await stop();
      wake?.();
    };
  };
  const ask = async () => {
    try {
      for (let tries = 0; waiters.length > 0;) {
        const { leaseId, running } = await gateway.takeLaunchSlot(request);
        if (leaseId !== null) {
          if (tries > 0) options.onWaiting?.(null);
          tries = 0;
          waiters.shift()?.resolve(granted(leaseId));
          continue;
        }
        // Cancelled while waiting: what is launched now sees the cancellation at once.
        if (options.signal?.aborted) for (const waiter of waiters.splice(0)) waiter.resolve(noSlot);
        else await backOff(running, tries++);
      }
    } catch (err) {
      for (const waiter of waiters.splice(0)) waiter.reject(err);
    } finally {
      asking = false;
    }
  };
  const backOff = async (running: number, tries: number) => {
    options.onWaiting?.(
      `all ${options.limit} launch slots of harness ${options.kind} are taken (${running} running across workers; ` +
        'harness.maxRunning); waiting for one',
    );
    const delay = Math.min(10 * pollMs, pollMs * 1.5 ** tries) * (0.5 + Math.random() / 2);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, delay);
      wake = () => (clearTimeout(timer), resolve());
    });
    wake = undefined;
  };
  return () =>
    new Promise<ReleaseSlot>((resolve, reject) => {
      waiters.push({ resolve, reject });
      if (asking) return;
      asking = true;
      void ask();
    });
}

const noSlot: ReleaseSlot = async () => undefined;

function renewing(
  gateway: GatewayControlClient,
  leaseId: string,
  ttlMs: number,
  onWarning: ((message: string) => void) | undefined,
): ReleaseSlot {
  const renew = async () => {
    const renewed = await gateway.renewLaunchSlot(leaseId, ttlMs).catch((err: unknown) => {
      onWarning?.(`launch slot lease ${leaseId} not renewed: ${(err as Error).message}`);
      return true;
    });
    if (!renewed)
      onWarning?.(
        `launch slot lease ${leaseId} expired before it was renewed and was reclaimed: this harness runs uncounted`,
      );
  };
  const timer = setInterval(() => void renew(), ttlMs / 3);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await gateway.releaseLaunchSlot(leaseId).catch((err: unknown) => {
      onWarning?.(`launch slot lease ${leaseId} not released (it expires by itself): ${(err as Error).message}`);
    });
  };
}
