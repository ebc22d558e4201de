import type { GatewayControlClient } from '../gateway/control-client.js';
import type { PolicyRegistry } from './policy-registry.js';
import { ensureServed, type Serving } from './serving.js';

/** What one pass of the reconciler found and did. */
export interface ServingState {
  /** Trained versions the aliases point at: what must be served. */
  needed: string[];
  /** Those loaded again this pass (a backend or gateway had forgotten them), with the endpoints. */
  loaded: Array<{ version: string; endpoints: string[] }>;
  /** Those that could not be served, and why (tried again next pass). */
  failed: Array<{ version: string; reason: string }>;
  at: string;
}

/**
 * One pass: every trained version an alias points at (production above all) is loaded on every serving endpoint
 * that lacks it and routed by the gateway (ensureServed: idempotent, a read of /v1/models when nothing is missing).
 * A backend that restarted forgets the versions loaded at run time; traffic to them fails until something loads them
 * again, which this pass does. Base versions (no parent) are the backend's own, from its config: not its to load.
 */
export async function reconcileServing(
  registry: PolicyRegistry,
  gateway: GatewayControlClient,
  serving: Serving,
  now: () => Date = () => new Date(),
): Promise<ServingState> {
  const aliases = await registry.aliases();
  const targets = [...new Set(Object.values(aliases))].sort();
  const state: ServingState = { needed: [], loaded: [], failed: [], at: now().toISOString() };
  for (const version of targets) {
    const policy = await registry.get(version);
    if (!policy || policy.parent === null) continue;
    state.needed.push(version);
    try {
      // A pass that finds everything loaded asks the backends only (the gateway restores its routes when it starts).
      const { loadedOn } = await ensureServed(policy, gateway, serving, false);
      if (loadedOn.length > 0) state.loaded.push({ version, endpoints: loadedOn });
    } catch (err) {
      state.failed.push({ version, reason: (err as Error).message });
    }
  }
  return state;
}

/**
 * Runs reconcileServing every `everyMs` until stopped, each pass after the last one ended; `onPass` hears each state
 * (the worker's /metrics and log).
 */
export function keepServing(
  pass: () => Promise<ServingState>,
  onPass: (state: ServingState) => void,
  onError: (err: Error) => void,
  everyMs = 5000,
): { stop(): Promise<void> } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const tick = () => {
    running = pass()
      .then(onPass, (err: unknown) => onError(err as Error))
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, everyMs).unref();
      });
  };
  tick();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
