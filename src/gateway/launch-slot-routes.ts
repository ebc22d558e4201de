import type { FastifyInstance } from 'fastify';
import type { CoordinationStore } from '../store/coordination-store.js';
import { controlRoutes as api } from './control-api.js';
import { GatewayHttpError } from './errors.js';
import type { GatewayContext } from './gateway-context.js';
import { serveControl } from './serve-control.js';

/**
 * Launch slots for rollout runners: leases in the coordination store, so a limit on running
 * harnesses of one kind holds across every worker (they reach the store through the gateway, as
 * for everything else they share).
 */
export async function launchSlotRoutes(app: FastifyInstance, context: GatewayContext): Promise<void> {
  const { requireAdmin } = context.credentials;
  const store = (): CoordinationStore => {
    if (!context.coordination)
      throw new GatewayHttpError(
        501,
        'no_coordination_store',
        "this gateway's trace store is not on SQLite or PostgreSQL, so it keeps no launch slots",
      );
    return context.coordination;
  };
  serveControl(app, api.takeLaunchSlot, requireAdmin, async ({ body }) => store().takeLease(body()));
  serveControl(app, api.renewLaunchSlot, requireAdmin, async ({ params, body }) => ({
    renewed: await store().renewLease(params.id, body().ttlMs),
  }));
  serveControl(app, api.releaseLaunchSlot, requireAdmin, async ({ params }) => ({
    released: await store().releaseLease(params.id),
  }));
}
