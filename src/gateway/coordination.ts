import { CoordinationStore } from '../store/coordination-store.js';
import { SqlTraceStore } from '../store/journal-store.js';
import type { TraceStore } from '../store/trace-store.js';
import { BackendLimits } from './backend-limits.js';
import { GatewayMembership, type MembershipTiming } from './gateway-membership.js';
import type { Logger } from '../log/logger.js';
import type { RoutingTable } from './routing.js';

/**
 * The coordination store on the trace store's own database (SQLite file or PostgreSQL), so every
 * gateway sharing a journal shares it too, with no setting of its own. Undefined for a store that
 * is not on SQL (tests' stand-ins): limits then hold in this gateway alone.
 */
export async function coordinationBeside(store: TraceStore): Promise<CoordinationStore | undefined> {
  if (!(store instanceof SqlTraceStore)) return undefined;
  return CoordinationStore.open(store.database);
}

/** The gateway's backend limits, and the membership that sets each one's share (none without limits). */
export async function backendAdmission(
  routing: RoutingTable,
  coordination: CoordinationStore | undefined,
  log: Logger,
  timing?: MembershipTiming,
): Promise<{ limits: BackendLimits; membership: GatewayMembership | undefined }> {
  const limits = new BackendLimits(
    Object.fromEntries(Object.entries(routing.backends).map(([name, backend]) => [name, backend.limit])),
  );
  if (limits.size === 0) return { limits, membership: undefined };
  if (!coordination) {
    for (const limit of limits.all()) limit.setCap(limit.spec.maxInFlight, 'the whole limit: no store is shared');
    return { limits, membership: undefined };
  }
  const membership = new GatewayMembership(coordination, limits, log, timing);
  await membership.start();
  return { limits, membership };
}
