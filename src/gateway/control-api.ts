import { z, type ZodType } from 'zod';
import {
  FAILURE_CLASSES,
  newEventSchema,
  newRolloutSchema,
  ROLLOUT_MODES,
  ROLLOUT_STATUSES,
  statusChangeSchema,
  type Rollout,
  type RolloutEvent,
} from '../rollouts/rollout.js';
import type { CallRecord, ListedRollout, Page, ShadowCallRecord } from '../store/trace-store.js';
import { routingName } from './config.js';
import type { Mirror } from './routing.js';

/**
 * The gateway's control API (rollouts, policies, mirrors), written once: the gateway registers
 * these routes (control-routes.ts) and GatewayControlClient calls them, both typed by the same
 * schemas, so a path or a field cannot differ between the two. Requests are validated by the
 * schemas; responses are typed, not validated (the store's records go out as the store made them).
 */
export interface ControlRoute {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Fastify's form: `:name` for a path parameter. */
  path: string;
  query?: ZodType;
  body?: ZodType;
  response: ZodType;
}

/** Keeps a route's literal path and schemas in its type (a plain annotation would widen them). */
function controlRoute<const R extends ControlRoute>(route: R): R {
  return route;
}

/** The parameters a path names, each a string: `/api/rollouts/:id` → `{ id: string }`. */
export type PathParams<Path extends string> = Path extends `${string}:${infer Name}/${infer Rest}`
  ? { [K in Name]: string } & PathParams<`/${Rest}`>
  : Path extends `${string}:${infer Name}`
    ? { [K in Name]: string }
    : Record<never, never>;

type SchemaOf<R, Part extends 'query' | 'body'> = R extends { [K in Part]: infer S extends ZodType } ? S : undefined;
type ParamsPart<R extends ControlRoute> = keyof PathParams<R['path']> extends never
  ? unknown
  : { params: PathParams<R['path']> };
/** A part the route takes: required, or optional where its schema accepts nothing at all. */
type InputPart<R, Part extends 'query' | 'body'> =
  SchemaOf<R, Part> extends ZodType
    ? undefined extends z.input<SchemaOf<R, Part>>
      ? { [K in Part]?: z.input<SchemaOf<R, Part>> }
      : { [K in Part]: z.input<SchemaOf<R, Part>> }
    : unknown;

/** What a caller sends: the path's parameters, and the query and body where the route takes them. */
export type ControlInput<R extends ControlRoute> = ParamsPart<R> & InputPart<R, 'query'> & InputPart<R, 'body'>;
/** What the route answers with on success. */
export type ControlOutput<R extends ControlRoute> = z.output<R['response']>;
/** The query and body as the route's schemas parse them (undefined where it takes none). */
export type ControlParsed<R extends ControlRoute, Part extends 'query' | 'body'> =
  SchemaOf<R, Part> extends ZodType ? z.output<SchemaOf<R, Part>> : undefined;

/** What creating a rollout (or a new attempt) returns: the credentials its harness gets. */
const issuedRollout = z.object({
  rollout: z.custom<Rollout>(),
  attempt: z.number().int(),
  key: z.string(),
  baseUrl: z.string(),
  pathBaseUrl: z.string(),
  /** W3C trace context of the attempt's trace, when the gateway exports traces: the harness gets it as TRACEPARENT. */
  traceparent: z.string().optional(),
});
export type IssuedRollout = z.output<typeof issuedRollout>;

/** A policy version as the router serves it (Router.status()). */
const policyStatus = z.object({
  policyVersion: z.string(),
  model: z.string(),
  backend: z.string(),
  paused: z.boolean(),
  inFlight: z.number().int(),
  aliases: z.array(z.string()),
});
export type PolicyStatus = z.output<typeof policyStatus>;

export const policySpecSchema = z.strictObject({
  backend: z.string().min(1).describe('a backend of gateway.backends'),
  model: routingName.describe('the name the backend serves the version under'),
});

const pageSize = z.coerce.number().int().min(1).max(500);

/** Every route of the control API, by the name the client calls it under. */
export const controlRoutes = {
  health: controlRoute({ method: 'GET', path: '/healthz', response: z.object({ ok: z.literal(true) }) }),

  // --- rollouts ---
  createRollout: controlRoute({
    method: 'POST',
    path: '/api/rollouts',
    // Idempotent by id; no body at all is a rollout with every default.
    body: newRolloutSchema.nullish().transform((rollout) => rollout ?? newRolloutSchema.parse({})),
    response: issuedRollout,
  }),
  listRollouts: controlRoute({
    method: 'GET',
    path: '/api/rollouts',
    query: z.strictObject({
      status: z.enum(ROLLOUT_STATUSES).optional(),
      mode: z.enum(ROLLOUT_MODES).optional(),
      taskId: z.string().optional(),
      batchId: z.string().optional(),
      failureClass: z.enum(FAILURE_CLASSES).optional(),
      policyVersion: z.string().optional(),
      minReward: z.coerce.number().optional(),
      maxReward: z.coerce.number().optional(),
      limit: pageSize.optional(),
      after: z.string().optional(),
    }),
    response: z.custom<Page<ListedRollout>>(),
  }),
  getRollout: controlRoute({ method: 'GET', path: '/api/rollouts/:id', response: z.custom<Rollout>() }),
  setRolloutStatus: controlRoute({
    method: 'POST',
    path: '/api/rollouts/:id/status',
    body: statusChangeSchema,
    response: z.custom<Rollout>(),
  }),
  startAttempt: controlRoute({ method: 'POST', path: '/api/rollouts/:id/attempts', response: issuedRollout }),
  /** A new attempt for a rollout that finished unscored (see TraceStore.reopenRollout). */
  reopenRollout: controlRoute({
    method: 'POST',
    path: '/api/rollouts/:id/reopen',
    body: z.strictObject({ reason: z.string().min(1).max(2000) }),
    response: issuedRollout,
  }),
  appendEvent: controlRoute({
    method: 'POST',
    path: '/api/rollouts/:id/events',
    /** attempt: the one an admin's event belongs to (a rollout key says its own); refused (409) once superseded. */
    query: z.object({ attempt: z.coerce.number().int().min(1).optional() }),
    body: newEventSchema,
    response: z.custom<RolloutEvent>(),
  }),
  listEvents: controlRoute({
    method: 'GET',
    path: '/api/rollouts/:id/events',
    response: z.object({ items: z.array(z.custom<RolloutEvent>()) }),
  }),
  listCalls: controlRoute({
    method: 'GET',
    path: '/api/rollouts/:id/calls',
    query: z.object({ attempt: z.coerce.number().int().min(1).optional() }),
    response: z.object({ items: z.array(z.custom<CallRecord>()) }),
  }),
  /** A key the rollout's verifier may use to read its calls and events (and nothing else). */
  verifierKey: controlRoute({
    method: 'POST',
    path: '/api/rollouts/:id/verifier-key',
    response: z.object({ key: z.string() }),
  }),

  // --- policies and aliases ---
  listPolicies: controlRoute({
    method: 'GET',
    path: '/api/policies',
    response: z.object({ items: z.array(policyStatus) }),
  }),
  registerPolicy: controlRoute({
    method: 'PUT',
    path: '/api/policies/:version',
    body: policySpecSchema,
    response: policyStatus,
  }),
  /** Whether calls pinned to the version would reach a backend now; 404 when it is not routed. */
  policyReady: controlRoute({
    method: 'GET',
    path: '/api/policies/:version/ready',
    response: z.object({ ready: z.boolean(), problems: z.array(z.string()) }),
  }),
  setAlias: controlRoute({
    method: 'PUT',
    path: '/api/aliases/:alias',
    body: z.strictObject({ policyVersion: z.string().min(1) }),
    response: z.object({ alias: z.string(), policyVersion: z.string() }),
  }),
  pausePolicy: controlRoute({ method: 'POST', path: '/api/policies/:version/pause', response: policyStatus }),
  resumePolicy: controlRoute({ method: 'POST', path: '/api/policies/:version/resume', response: policyStatus }),
  /** Waits (at most timeoutMs) until no call of the version is in flight, shadow calls to it included. */
  drainPolicy: controlRoute({
    method: 'POST',
    path: '/api/policies/:version/drain',
    query: z.object({ timeoutMs: z.coerce.number().int().min(0).max(3_600_000).default(60_000) }),
    response: policyStatus.extend({ drained: z.boolean() }),
  }),

  // --- launch slots: a limit on running harnesses of a kind, held across workers by leases in the store ---
  /** A lease when fewer than `limit` of the kind are live (expired ones are reclaimed first); else leaseId null. */
  takeLaunchSlot: controlRoute({
    method: 'POST',
    path: '/api/launch-slots',
    body: z.strictObject({
      kind: z.string().min(1).max(500),
      holder: z.string().min(1).max(500),
      limit: z.number().int().min(1),
      ttlMs: z.number().int().min(100).max(3_600_000),
    }),
    response: z.object({ leaseId: z.string().nullable(), running: z.number().int() }),
  }),
  /** renewed false: the lease expired and was reclaimed (its holder was presumed dead). */
  renewLaunchSlot: controlRoute({
    method: 'POST',
    path: '/api/launch-slots/:id/renew',
    body: z.strictObject({ ttlMs: z.number().int().min(100).max(3_600_000) }),
    response: z.object({ renewed: z.boolean() }),
  }),
  releaseLaunchSlot: controlRoute({
    method: 'DELETE',
    path: '/api/launch-slots/:id',
    response: z.object({ released: z.boolean() }),
  }),

  // --- mirror mode: an alias's production calls also go to a candidate, journaled as shadow calls ---
  listMirrors: controlRoute({
    method: 'GET',
    path: '/api/mirrors',
    response: z.object({ items: z.array(z.custom<Mirror>()) }),
  }),
  setMirror: controlRoute({
    method: 'PUT',
    path: '/api/mirrors/:alias',
    body: z.strictObject({
      candidate: z.string().min(1).describe('a registered policy version'),
      sampleRate: z.number().gt(0).max(1).default(1).describe('the share of rollouts mirrored, each one whole'),
    }),
    response: z.custom<Mirror>(),
  }),
  clearMirror: controlRoute({ method: 'DELETE', path: '/api/mirrors/:alias', response: z.custom<Mirror>() }),
  /**
   * Pages of at most `limit` in the order they were recorded; `next` is the `after` of the following page, null on the
   * last.
   */
  listShadowCalls: controlRoute({
    method: 'GET',
    path: '/api/shadow-calls',
    query: z.strictObject({
      candidate: z.string().min(1).optional(),
      rolloutId: z.string().min(1).optional(),
      limit: pageSize.default(100),
      /** The `next` of the previous page. */
      after: z.string().min(1).optional(),
    }),
    response: z.custom<Page<ShadowCallRecord>>(),
  }),
};

/** The path with its parameters filled in (each encoded) and the query appended. */
export function controlUrl(
  route: ControlRoute,
  params: Record<string, string> | undefined,
  query: object | undefined,
): string {
  const path = route.path.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(params?.[name] ?? ''));
  const search = new URLSearchParams(
    Object.entries(query ?? {}).flatMap(([key, value]) =>
      value === undefined ? [] : [[key, String(value)] as [string, string]],
    ),
  ).toString();
  return search ? `${path}?${search}` : path;
}
