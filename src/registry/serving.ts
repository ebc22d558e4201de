import type { GatewayControlClient } from '../gateway/control-client.js';
import type { PolicySpec } from '../gateway/routing.js';
import type { PolicyRecord, PolicyRegistry } from './policy-registry.js';
import { restoreAliases } from './promotion.js';
import { loadVersion, ServingError, servesVersion, type ServedVersion, type WeightSyncKind } from './weight-sync.js';

/** Where Rein serves the versions it trains: a gateway backend, its endpoints and how they take new weights. */
export interface Serving {
  backend: string;
  endpoints: string[];
  /** How the endpoints load a version (weight-sync.ts); default: rein, the embedded policy server. */
  weightSync?: WeightSyncKind;
  /**
   * The key the endpoints want for loading versions (vLLM's --api-key, the embedded policy
   * server's admin key); read when needed, so a key written after this worker started is found.
   */
  apiKey?: () => string | undefined;
}

export { ServingError };

/** Versions Rein trained (they have a parent): the backend loads them at run time, not from its config. */
export const trainedVersions = async (registry: PolicyRegistry): Promise<PolicyRecord[]> =>
  (await registry.list()).filter((p) => p.parent !== null);

/**
 * Routes every trained version of the registry to the serving backend and points the aliases
 * where the registry says: a gateway keeps its routes in memory, so one that starts (or starts
 * again) learns them here. The one routine for every way a gateway starts.
 */
export async function restoreRoutes(
  registry: PolicyRegistry,
  router: {
    registerPolicy(version: string, spec: PolicySpec): void;
    setAlias(alias: string, version: string): void;
    models(): Array<{ id: string }>;
  },
  backend: string,
): Promise<{ restored: string[]; skipped: string[]; skippedAliases: string[] }> {
  const routed = new Set(router.models().map((m) => m.id));
  const restored: string[] = [];
  const skipped: string[] = [];
  for (const policy of await trainedVersions(registry)) {
    if (routed.has(policy.version)) continue;
    try {
      router.registerPolicy(policy.version, { backend, model: policy.version });
      restored.push(policy.version);
    } catch (err) {
      // A gateway whose config lacks the serving backend still starts, and says why it routes less.
      skipped.push(`${policy.version}: ${(err as Error).message}`);
    }
  }
  return { restored, skipped, skippedAliases: await restoreAliases(registry, router) };
}

/**
 * Makes a version servable through the gateway: loaded on every serving endpoint that lacks it
 * (a restarted backend forgot it), then routed by the gateway (a restarted gateway forgot it).
 * Idempotent; cheap when both already have it.
 */
export async function ensureServed(
  policy: ServedVersion,
  gateway: GatewayControlClient,
  serving: Serving,
  /** false: route only a version this call loaded somewhere (a gateway that restarted restores its routes itself). */
  routeAlways = true,
): Promise<{ loadedOn: string[] }> {
  const loadedOn: string[] = [];
  for (const endpoint of serving.endpoints) {
    const base = endpoint.replace(/\/+$/, '').replace(/\/v1$/, '');
    const key = serving.apiKey?.();
    const ask = async (route: string, init?: RequestInit) => {
      try {
        return await fetch(`${base}${route}`, {
          ...init,
          headers: {
            ...(init?.headers as Record<string, string> | undefined),
            ...(key && { authorization: `Bearer ${key}` }),
          },
        });
      } catch (err) {
        throw new ServingError(
          `serving endpoint ${base} is unreachable (${(err as Error).message}); is the inference server (or \`rein policy serve\`) running?`,
        );
      }
    };
    const kind = serving.weightSync ?? 'rein';
    if (await servesVersion(kind, ask, base, policy)) continue;
    await loadVersion(kind, ask, base, policy);
    loadedOn.push(base);
  }
  if (routeAlways || loadedOn.length > 0)
    await gateway.registerPolicy(policy.version, { backend: serving.backend, model: policy.version });
  return { loadedOn };
}
