import type { FastifyInstance } from 'fastify';
import { controlRoutes as api, type PolicyStatus } from './control-api.js';
import { GatewayHttpError } from './errors.js';
import type { GatewayContext } from './gateway-context.js';
import type { Route, Router } from './routing.js';
import { serveControl } from './serve-control.js';

/**
 * What the gateway serves, changed without a restart: policy versions and aliases, pausing and
 * draining a version for a weight update, and mirror mode (an alias's production calls also go
 * to a candidate, whose answers are journaled as shadow calls and never returned).
 */
export async function policyRoutes(app: FastifyInstance, context: GatewayContext): Promise<void> {
  const { router, store } = context;
  const { requireAdmin } = context.credentials;

  serveControl(app, api.listPolicies, requireAdmin, async () => ({ items: router.status() }));
  serveControl(app, api.registerPolicy, requireAdmin, async ({ params, body }) => {
    router.registerPolicy(params.version, body());
    return policyStatus(router, params.version);
  });
  // Whether a call pinned to the version would reach a backend that serves it now: the rollout
  // runner waits on this before it spends an attempt, so a short outage costs a pause, not evidence.
  serveControl(app, api.policyReady, requireAdmin, async ({ params }) => {
    const routes = router.routesOf(params.version);
    if (!routes)
      throw new GatewayHttpError(404, 'policy_not_found', `policy ${params.version} is not in the routing table`);
    const problems = (await Promise.all(routes.map(backendProblem))).filter((p): p is string => p !== null);
    return { ready: problems.length < routes.length, problems };
  });
  serveControl(app, api.setAlias, requireAdmin, async ({ params, body }) => {
    const { policyVersion } = body();
    router.setAlias(params.alias, policyVersion);
    return { alias: params.alias, policyVersion };
  });
  serveControl(app, api.pausePolicy, requireAdmin, async ({ params }) => {
    router.pause(params.version);
    return policyStatus(router, params.version);
  });
  serveControl(app, api.resumePolicy, requireAdmin, async ({ params }) => {
    router.resume(params.version);
    return policyStatus(router, params.version);
  });
  serveControl(app, api.drainPolicy, requireAdmin, async ({ params, query }) => {
    const { timeoutMs } = query();
    const drained = await Promise.race([
      router.drain(params.version).then(() => true),
      new Promise<false>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref()),
    ]);
    return { drained, ...policyStatus(router, params.version) };
  });

  serveControl(app, api.listMirrors, requireAdmin, async () => ({ items: router.mirrors() }));
  serveControl(app, api.setMirror, requireAdmin, async ({ params, body }) => {
    const { candidate, sampleRate } = body();
    return router.setMirror(params.alias, candidate, sampleRate);
  });
  serveControl(app, api.clearMirror, requireAdmin, async ({ params }) => {
    const removed = router.clearMirror(params.alias);
    if (!removed) {
      throw new GatewayHttpError(
        404,
        'mirror_not_found',
        `alias ${params.alias} is not mirrored; GET /api/mirrors lists the mirrors`,
      );
    }
    return removed;
  });
  serveControl(app, api.listShadowCalls, requireAdmin, async ({ query }) => {
    const { limit, ...filter } = query();
    const items = await store.listShadowCalls({ ...filter, limit: limit + 1 });
    const page = items.slice(0, limit);
    return { items: page, next: items.length > limit ? (page.at(-1)?.id ?? null) : null };
  });
}

function policyStatus(router: Router, version: string): PolicyStatus {
  const status = router.status().find((p) => p.policyVersion === version);
  if (!status) throw new GatewayHttpError(404, 'policy_not_found', `policy ${version} is not in the routing table`);
  return status;
}

/** Why a backend endpoint cannot answer now (unreachable or failing); null when it can. */
async function backendProblem(route: Route): Promise<string | null> {
  const url = `${route.endpoint.replace(/\/+$/, '')}/models`;
  try {
    const res = await fetch(url, {
      signal: AbortSignal.timeout(3000),
      headers: route.backend.apiKey ? { authorization: `Bearer ${route.backend.apiKey}` } : {},
    });
    if (!res.ok) return `backend ${route.backendName} at ${route.endpoint} answered ${res.status} to GET /models`;
    // A backend that lost the model answers too: waiting would not bring it back (Rein loads it again).
    return null;
  } catch (err) {
    return `backend ${route.backendName} at ${route.endpoint} is unreachable (${(err as Error).message})`;
  }
}
