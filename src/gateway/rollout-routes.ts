import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Rollout } from '../rollouts/rollout.js';
import type { TraceStore } from '../store/trace-store.js';
import { refuseClosedAttempt, refuseSupersededAttempt } from './admission.js';
import { controlRoutes as api, type IssuedRollout } from './control-api.js';
import { credentialOf } from './credentials.js';
import { GatewayHttpError } from './errors.js';
import type { GatewayContext } from './gateway-context.js';
import { serveControl } from './serve-control.js';

/**
 * The rollout API: create rollouts and their attempts (each with its key), move their status, read their calls and
 * events.
 */
export async function rolloutRoutes(app: FastifyInstance, context: GatewayContext): Promise<void> {
  const { store, tracing, credentials } = context;
  const { keys, requireAdmin, requireAdminOrVerifier } = credentials;
  const issued = (rollout: Rollout) => issuedRollout(context, rollout);

  serveControl(app, api.createRollout, requireAdmin, async ({ body, reply }) => {
    const input = body();
    const { rollout, created } = await store.createRollout({ ...input, id: input.id ?? `ro-${randomUUID()}` });
    void reply.code(created ? 201 : 200);
    return issued(rollout);
  });
  serveControl(app, api.listRollouts, requireAdmin, async ({ query }) => store.listRollouts(query()));
  serveControl(app, api.getRollout, requireAdmin, async ({ params }) => requireRollout(store, params.id));
  serveControl(app, api.setRolloutStatus, requireAdmin, async ({ params, body }) => {
    const change = body();
    await requireRollout(store, params.id);
    const rollout = await store.setRolloutStatus(params.id, change, 'admin');
    tracing?.statusChanged(rollout);
    return rollout;
  });
  serveControl(app, api.startAttempt, requireAdmin, async ({ params, reply }) => {
    await requireRollout(store, params.id);
    const rollout = await store.startAttempt(params.id);
    tracing?.attemptStarted(rollout);
    void reply.code(201);
    return issued(rollout);
  });
  serveControl(app, api.reopenRollout, requireAdmin, async ({ params, body, reply }) => {
    const { reason } = body();
    await requireRollout(store, params.id);
    const rollout = await store.reopenRollout(params.id, reason);
    void reply.code(201);
    return issued(rollout);
  });
  // The harness reports with its own rollout key; the rollout runner and the verifier's caller with the admin key.
  serveControl(app, api.appendEvent, undefined, async ({ params, query, body, req, reply }) => {
    const receivedAt = Date.now();
    const key = credentialOf(req);
    const claim = key ? keys.verify(key) : undefined;
    if (!claim && !credentials.isAdmin(key)) {
      throw new GatewayHttpError(401, 'invalid_key', 'send the rollout key (or the admin key) to append events');
    }
    if (claim && claim.rolloutId !== params.id) {
      throw new GatewayHttpError(403, 'forbidden', 'a rollout key may append events to its own rollout only');
    }
    const rollout = await requireRollout(store, params.id);
    if (claim) refuseClosedAttempt(rollout, claim);
    const { attempt = rollout.attempts } = query();
    if (!claim) refuseSupersededAttempt(rollout, attempt);
    const event = body();
    // The store checks the verifier's reward's attempt again as it records it (a new attempt may start meanwhile).
    const recorded = await store.appendEvent(rollout.id, claim?.attempt ?? attempt, event, claim ? 'rollout' : 'admin');
    tracing?.eventRecorded(recorded, req.headers, receivedAt);
    // The attempt's reward was recorded already: the one that stands comes back, with `duplicate: true`.
    void reply.code(recorded.duplicate ? 200 : 201);
    return recorded;
  });
  serveControl(app, api.verifierKey, requireAdmin, async ({ params }) => {
    await requireRollout(store, params.id);
    return { key: keys.issueVerifierKey(params.id) };
  });
  serveControl(app, api.listCalls, requireAdminOrVerifier, async ({ params, query }) => {
    await requireRollout(store, params.id);
    return { items: await store.listCalls(params.id, query().attempt) };
  });
  serveControl(app, api.listEvents, requireAdminOrVerifier, async ({ params }) => {
    await requireRollout(store, params.id);
    return { items: await store.listEvents(params.id) };
  });
}

/** The credentials a harness gets for the rollout's current attempt. */
function issuedRollout(context: GatewayContext, rollout: Rollout): IssuedRollout {
  const publicUrl = context.publicUrl();
  const attempt = rollout.attempts;
  return {
    rollout,
    attempt,
    key: context.credentials.keys.issue(rollout.id, attempt),
    baseUrl: `${publicUrl}/v1`,
    pathBaseUrl: `${publicUrl}/rollouts/${encodeURIComponent(rollout.id)}/attempts/${attempt}/v1`,
    // The harness gets it as TRACEPARENT: its own spans then join the attempt's trace.
    ...(context.tracing && { traceparent: context.tracing.traceparentOf(rollout.id, attempt) }),
  };
}

async function requireRollout(store: TraceStore, id: string) {
  const rollout = await store.getRollout(id);
  if (!rollout) throw new GatewayHttpError(404, 'rollout_not_found', `rollout ${id} does not exist`);
  return rollout;
}
