import { randomUUID } from 'node:crypto';
import { clientErrorAnswer } from '../http/client-error.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { z, ZodError } from 'zod';
import { newEventSchema, newRolloutSchema, ROLLOUT_MODES, ROLLOUT_STATUSES, statusChangeSchema } from '../rollouts/rollout.js';
import { ROLLOUT_ID_MAX_LENGTH } from '../rollouts/rollout-id.js';
import { StoreConflictError, type CallEndpoint, type TraceStore } from '../store/trace-store.js';
import { refuseClosedAttempt } from './admission.js';
import { RedactingStore } from './redacting-store.js';
import { matchesHash, RolloutKeys, type RolloutKeyClaim } from './keys.js';
import { createLogger, type Logger } from '../log/logger.js';
import { GatewayMetrics } from '../metrics/gateway-metrics.js';
import { exposition } from '../metrics/registry.js';
import { MAX_JSON_DEPTH, nestedDeeperThan } from './json-text.js';
import { GatewayCallError, GatewayHttpError, ModelCallProxy } from './proxy.js';
import type { RedactionRule } from './redact.js';
import { Router, ROUTING_NAME_MAX_LENGTH, RoutingError, type Route, type RoutingTable } from './routing.js';
import { GatewayTracing, type TracingOptions } from '../telemetry/gateway-tracing.js';

export interface GatewayOptions {
  store: TraceStore;
  routing: RoutingTable;
  /** Secret the rollout keys are derived from (see RolloutKeys). */
  secret: Buffer;
  /** SHA-256 (hex) of the admin key that may use the control API. */
  adminKeyHash: string;
  /** How harnesses reach this gateway; default: the address it listens on. */
  publicUrl?: string;
  bodyLimitBytes?: number;
  /** Longest a harness may take to send one whole request (headers and body); default 30 s. A slow sender holds a connection, not the gateway. */
  requestTimeoutMs?: number;
  /** Where the gateway's own failures are logged (default: warnings and errors to stderr). */
  logger?: Logger;
  redaction?: readonly RedactionRule[];
  headersTimeoutMs?: number;
  bodyTimeoutMs?: number;
  retryAfterSeconds?: number;
  /** Mirror mode: shadow calls in flight at most (default 256); past it they are journaled as skipped. */
  maxShadowsInFlight?: number;
  /**
   * On start, end the calls a previous gateway left in flight as `gateway_lost` (default true).
   * Off only where several gateways share one store, since a live one's calls are in flight too.
   */
  markLostCalls?: boolean;
  /** OpenTelemetry traces over OTLP/HTTP (gateway.tracing); none when unset. */
  tracing?: TracingOptions | undefined;
}

export interface Gateway {
  app: FastifyInstance;
  router: Router;
  keys: RolloutKeys;
  /** Present when traces are exported: its stats() count exported and dropped spans. */
  tracing: GatewayTracing | undefined;
  url: string;
  /** Calls a previous gateway left in flight, ended as `gateway_lost` when this one started. */
  lostCalls: number;
  close(): Promise<void>;
}

const ENDPOINTS: Array<[string, CallEndpoint]> = [
  ['chat/completions', 'chat.completions'],
  ['completions', 'completions'],
  ['responses', 'responses'],
];

const policySpecSchema = z.strictObject({
  backend: z.string().min(1).describe('a backend of gateway.backends'),
  model: z.string().min(1).describe('the name the backend serves the version under'),
});

const listQuery = z.strictObject({
  status: z.enum(ROLLOUT_STATUSES).optional(),
  mode: z.enum(ROLLOUT_MODES).optional(),
  taskId: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(500).optional(),
  after: z.string().optional(),
});

const shadowCallsQuery = z.strictObject({
  candidate: z.string().min(1).optional(),
  rolloutId: z.string().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
  /** The `next` of the previous page. */
  after: z.string().min(1).optional(),
});

/** Builds and starts the gateway: the OpenAI-compatible proxy and the rollout control API. */
export async function startGateway(options: GatewayOptions, listen: { host: string; port: number }): Promise<Gateway> {
  const router = new Router(options.routing, options.retryAfterSeconds);
  const keys = new RolloutKeys(options.secret);
  // Every write the gateway journals goes through redaction (see RedactingStore).
  const store = new RedactingStore(options.store, options.redaction ?? []);
  const metrics = new GatewayMetrics();
  const log = options.logger ?? createLogger('warn', 'gateway');
  const tracing = options.tracing && new GatewayTracing(options.tracing, { store, redaction: options.redaction ?? [], log });
  const proxy = new ModelCallProxy({
    store,
    router,
    redaction: options.redaction ?? [],
    headersTimeoutMs: options.headersTimeoutMs ?? 600_000,
    bodyTimeoutMs: options.bodyTimeoutMs ?? 120_000,
    ...(options.maxShadowsInFlight !== undefined && { maxShadowsInFlight: options.maxShadowsInFlight }),
    metrics,
    tracing,
  });
  // Route parameters as long as the longest rollout id and routing name (Fastify's default, 100, answered 414).
  const app = Fastify({ bodyLimit: options.bodyLimitBytes ?? 32 * 1024 * 1024, logger: false, ...connectionOptions(options.requestTimeoutMs ?? 30_000), routerOptions: { maxParamLength: Math.max(ROLLOUT_ID_MAX_LENGTH, ROUTING_NAME_MAX_LENGTH) } });
  // The bytes each JSON body arrived as: the backend gets them, not a re-serialisation.
  const rawBodies = new WeakMap<IncomingMessage, string>();
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, text, done) => {
    try {
      const body = parseJsonBody(text as string);
      rawBodies.set(req.raw, text as string);
      done(null, body);
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  let publicUrl = options.publicUrl ?? '';

  const isAdmin = (key: string | undefined) => key !== undefined && matchesHash(key, options.adminKeyHash);
  const requireAdmin = async (req: FastifyRequest) => {
    const key = credentialOf(req);
    if (!key) throw new GatewayHttpError(401, 'missing_key', 'the control API needs the admin key: send Authorization: Bearer <admin key>');
    if (!isAdmin(key)) throw new GatewayHttpError(403, 'forbidden', 'this key may not use the control API');
  };

  /** A failure of the gateway itself: logged with what leads to it, answered without its internals. */
  const internal = (err: unknown, req: { method: string; url: string }, res: ServerResponse) => {
    const callId = err instanceof GatewayCallError ? err.callId : (res.getHeader('x-rein-call-id') as string | undefined);
    log.error({ err, callId, method: req.method, url: req.url }, 'gateway error');
    return callId;
  };
  app.setErrorHandler((err, req, reply) => {
    const { status, code, message, headers } = describeError(err);
    const callId = status >= 500 && code === 'gateway_error' ? internal(err, req, reply.raw) : undefined;
    void reply.code(status).headers(headers).send(errorBody(status, code, callId === undefined ? message : `${message} (call ${callId})`));
  });
  // Errors Fastify raises before any route (a URL it cannot decode, a parameter too long) in Rein's shape too.
  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send(errorBody(404, 'not_found', `no route ${req.method} ${req.url}`));
  });

  app.get('/healthz', async () => ({ ok: true }));
  // Prometheus scrapes with the admin key (a bearer token): this port faces the harnesses, code the trained model drives.
  app.get('/metrics', { preHandler: requireAdmin }, async (_req, reply) => {
    const { contentType, text } = await exposition(metrics.registry);
    return reply.type(contentType).send(text);
  });

  // --- the OpenAI-compatible proxy ---------------------------------------------------------
  const proxyCall = async (req: FastifyRequest, reply: FastifyReply, endpoint: CallEndpoint, pathClaim?: RolloutKeyClaim) => {
    const claim = await authorizeCall(req, pathClaim);
    const body = req.body;
    const text = rawBodies.get(req.raw);
    if (body === null || typeof body !== 'object' || Array.isArray(body) || text === undefined) {
      throw new GatewayHttpError(400, 'invalid_body', 'the request body must be a JSON object (sent as content-type application/json)');
    }
    const rollout = await admitRollout(claim);
    const controller = new AbortController();
    const res = reply.raw;
    res.on('close', () => {
      if (!res.writableFinished) controller.abort();
    });
    void reply.hijack();
    try {
      await proxy.handle(
        {
          rolloutId: claim.rolloutId,
          attempt: claim.attempt,
          endpoint,
          body: body as Record<string, unknown>,
          text,
          headers: req.headers,
          pinnedPolicyVersion: rollout.policyVersion,
          signal: controller.signal,
        },
        res,
      );
    } catch (err) {
      const { status, code } = describeError(err);
      sendRawError(res, err, status >= 500 && code === 'gateway_error' ? internal(err, req, res) : undefined);
    }
  };

  const authorizeCall = async (req: FastifyRequest, pathClaim?: RolloutKeyClaim): Promise<RolloutKeyClaim> => {
    const key = credentialOf(req);
    const claim = key ? keys.verify(key) : undefined;
    if (!pathClaim) {
      if (!key) {
        throw new GatewayHttpError(401, 'missing_key', 'no API key: set OPENAI_API_KEY to the rollout key Rein issued for this rollout');
      }
      if (!claim) throw new GatewayHttpError(401, 'invalid_key', 'the API key is not a valid rollout key for this gateway');
      return claim;
    }
    if (claim) {
      if (claim.rolloutId !== pathClaim.rolloutId || claim.attempt !== pathClaim.attempt) {
        throw new GatewayHttpError(403, 'forbidden', 'this rollout key belongs to another rollout attempt');
      }
      return claim;
    }
    if (isAdmin(key)) return pathClaim;
    // Without a rollout key, the path form is open only for a rollout created keyless on purpose.
    const rollout = await store.getRollout(pathClaim.rolloutId);
    if (!rollout || rollout.keyless) return pathClaim;
    throw key
      ? new GatewayHttpError(401, 'invalid_key', 'the API key is not a valid rollout key for this gateway')
      : new GatewayHttpError(401, 'missing_key', `rollout ${pathClaim.rolloutId} was not created keyless; send its rollout key`);
  };

  const admitRollout = async (claim: RolloutKeyClaim) => {
    const rollout = await store.getRollout(claim.rolloutId);
    if (!rollout) throw new GatewayHttpError(404, 'rollout_not_found', `rollout ${claim.rolloutId} does not exist`);
    refuseClosedAttempt(rollout, claim);
    if (rollout.status === 'queued') {
      try {
        await store.setRolloutStatus(rollout.id, { status: 'running', reason: 'first model call' }, 'gateway');
      } catch (err) {
        // Another call of the same rollout got there first.
        if (!(err instanceof StoreConflictError)) throw err;
      }
    }
    return rollout;
  };

  for (const [path, endpoint] of ENDPOINTS) {
    app.post(`/v1/${path}`, (req, reply) => proxyCall(req, reply, endpoint));
    app.post<{ Params: { rolloutId: string; attempt: string } }>(`/rollouts/:rolloutId/attempts/:attempt/v1/${path}`, (req, reply) =>
      proxyCall(req, reply, endpoint, pathClaimOf(req.params)),
    );
  }
  const listModels = async (req: FastifyRequest, pathClaim?: RolloutKeyClaim) => {
    const key = credentialOf(req);
    if (!pathClaim && !isAdmin(key) && !(key && keys.verify(key))) {
      throw new GatewayHttpError(401, 'invalid_key', 'send a rollout key (or the admin key) to list models');
    }
    if (pathClaim) await authorizeCall(req, pathClaim);
    // Each name with its backend's model card (context length, root, …) as the backend lists it, under the name the harness uses.
    const cards = new Map<string, Promise<Map<string, Record<string, unknown>>>>();
    const data = await Promise.all(
      router.models().map(async (m) => {
        const route = router.routesOf(m.policyVersion)?.[0];
        if (route && !cards.has(route.endpoint)) cards.set(route.endpoint, backendModels(route));
        const card = route ? (await cards.get(route.endpoint))?.get(route.model) : undefined;
        return { object: 'model', created: 0, owned_by: 'rein', ...card, id: m.id, policy_version: m.policyVersion };
      }),
    );
    return { object: 'list', data };
  };
  app.get('/v1/models', (req) => listModels(req));
  app.get<{ Params: { rolloutId: string; attempt: string } }>('/rollouts/:rolloutId/attempts/:attempt/v1/models', (req) =>
    listModels(req, pathClaimOf(req.params)),
  );

  // --- the control API -----------------------------------------------------------------------
  const keyed = (rolloutId: string, attempt: number) => ({
    attempt,
    key: keys.issue(rolloutId, attempt),
    baseUrl: `${publicUrl}/v1`,
    pathBaseUrl: `${publicUrl}/rollouts/${encodeURIComponent(rolloutId)}/attempts/${attempt}/v1`,
    // The harness gets it as TRACEPARENT: its own spans then join the attempt's trace.
    ...(tracing && { traceparent: tracing.traceparentOf(rolloutId, attempt) }),
  });

  app.post('/api/rollouts', { preHandler: requireAdmin }, async (req, reply) => {
    const input = newRolloutSchema.parse(req.body ?? {});
    const { rollout, created } = await store.createRollout({ ...input, id: input.id ?? `ro-${randomUUID()}` });
    return reply.code(created ? 201 : 200).send({ rollout, ...keyed(rollout.id, rollout.attempts) });
  });
  app.get('/api/rollouts', { preHandler: requireAdmin }, async (req) => store.listRollouts(listQuery.parse(req.query)));
  app.get<{ Params: { id: string } }>('/api/rollouts/:id', { preHandler: requireAdmin }, async (req) => requireRollout(store, req.params.id));
  app.post<{ Params: { id: string } }>('/api/rollouts/:id/status', { preHandler: requireAdmin }, async (req) => {
    const change = statusChangeSchema.parse(req.body);
    await requireRollout(store, req.params.id);
    const rollout = await store.setRolloutStatus(req.params.id, change, 'admin');
    tracing?.statusChanged(rollout);
    return rollout;
  });
  app.post<{ Params: { id: string } }>('/api/rollouts/:id/attempts', { preHandler: requireAdmin }, async (req, reply) => {
    await requireRollout(store, req.params.id);
    const rollout = await store.startAttempt(req.params.id);
    tracing?.attemptStarted(rollout);
    return reply.code(201).send({ rollout, ...keyed(rollout.id, rollout.attempts) });
  });
  app.post<{ Params: { id: string } }>('/api/rollouts/:id/reopen', { preHandler: requireAdmin }, async (req, reply) => {
    const { reason } = z.strictObject({ reason: z.string().min(1).max(2000) }).parse(req.body);
    await requireRollout(store, req.params.id);
    const rollout = await store.reopenRollout(req.params.id, reason);
    return reply.code(201).send({ rollout, ...keyed(rollout.id, rollout.attempts) });
  });
  app.post<{ Params: { id: string } }>('/api/rollouts/:id/events', async (req, reply) => {
    const receivedAt = Date.now();
    const key = credentialOf(req);
    const claim = key ? keys.verify(key) : undefined;
    if (!claim && !isAdmin(key)) {
      throw new GatewayHttpError(401, 'invalid_key', 'send the rollout key (or the admin key) to append events');
    }
    if (claim && claim.rolloutId !== req.params.id) {
      throw new GatewayHttpError(403, 'forbidden', 'a rollout key may append events to its own rollout only');
    }
    const rollout = await requireRollout(store, req.params.id);
    if (claim) refuseClosedAttempt(rollout, claim);
    const event = newEventSchema.parse(req.body);
    const recorded = await store.appendEvent(rollout.id, claim?.attempt ?? rollout.attempts, event, claim ? 'rollout' : 'admin');
    tracing?.eventRecorded(recorded, req.headers, receivedAt);
    return reply.code(201).send(recorded);
  });
  // The verifier reads what it judges with its own key, which can read one rollout and write nothing.
  const requireAdminOrVerifier = async (req: FastifyRequest<{ Params: { id: string } }>) => {
    const key = credentialOf(req);
    if (key && keys.verifyVerifierKey(key) === req.params.id) return;
    if (key?.startsWith('vk-')) throw new GatewayHttpError(403, 'forbidden', 'a verifier key reads its own rollout only');
    await requireAdmin(req);
  };
  app.post<{ Params: { id: string } }>('/api/rollouts/:id/verifier-key', { preHandler: requireAdmin }, async (req) => {
    await requireRollout(store, req.params.id);
    return { key: keys.issueVerifierKey(req.params.id) };
  });
  app.get<{ Params: { id: string }; Querystring: { attempt?: string } }>(
    '/api/rollouts/:id/calls',
    { preHandler: requireAdminOrVerifier },
    async (req) => {
      await requireRollout(store, req.params.id);
      const attempt = req.query.attempt === undefined ? undefined : z.coerce.number().int().min(1).parse(req.query.attempt);
      return { items: await store.listCalls(req.params.id, attempt) };
    },
  );
  app.get<{ Params: { id: string } }>('/api/rollouts/:id/events', { preHandler: requireAdminOrVerifier }, async (req) => {
    await requireRollout(store, req.params.id);
    return { items: await store.listEvents(req.params.id) };
  });

  app.get('/api/policies', { preHandler: requireAdmin }, async () => ({ items: router.status() }));
  app.put<{ Params: { version: string } }>('/api/policies/:version', { preHandler: requireAdmin }, async (req) => {
    const spec = policySpecSchema.parse(req.body);
    router.registerPolicy(req.params.version, spec);
    return policyStatus(router, req.params.version);
  });
  // Whether a call pinned to the version would reach a backend that serves it now: the rollout
  // runner waits on this before it spends an attempt, so a short outage costs a pause, not evidence.
  app.get<{ Params: { version: string } }>('/api/policies/:version/ready', { preHandler: requireAdmin }, async (req) => {
    const routes = router.routesOf(req.params.version);
    if (!routes) throw new GatewayHttpError(404, 'policy_not_found', `policy ${req.params.version} is not in the routing table`);
    const problems = (await Promise.all(routes.map(backendProblem))).filter((p): p is string => p !== null);
    return { ready: problems.length < routes.length, problems };
  });
  app.put<{ Params: { alias: string } }>('/api/aliases/:alias', { preHandler: requireAdmin }, async (req) => {
    const { policyVersion } = z.strictObject({ policyVersion: z.string().min(1) }).parse(req.body);
    router.setAlias(req.params.alias, policyVersion);
    return { alias: req.params.alias, policyVersion };
  });
  app.post<{ Params: { version: string } }>('/api/policies/:version/pause', { preHandler: requireAdmin }, async (req) => {
    router.pause(req.params.version);
    return policyStatus(router, req.params.version);
  });
  app.post<{ Params: { version: string } }>('/api/policies/:version/resume', { preHandler: requireAdmin }, async (req) => {
    router.resume(req.params.version);
    return policyStatus(router, req.params.version);
  });
  app.post<{ Params: { version: string }; Querystring: { timeoutMs?: string } }>(
    '/api/policies/:version/drain',
    { preHandler: requireAdmin },
    async (req) => {
      const timeoutMs = z.coerce.number().int().min(0).max(3_600_000).default(60_000).parse(req.query.timeoutMs);
      const drained = await Promise.race([
        router.drain(req.params.version).then(() => true),
        new Promise<false>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref()),
      ]);
      return { drained, ...policyStatus(router, req.params.version) };
    },
  );

  // Mirror mode: an alias's production calls also go to a candidate, whose answers are journaled
  // as shadow calls and never returned.
  app.get('/api/mirrors', { preHandler: requireAdmin }, async () => ({ items: router.mirrors() }));
  app.put<{ Params: { alias: string } }>('/api/mirrors/:alias', { preHandler: requireAdmin }, async (req) => {
    const { candidate, sampleRate } = z
      .strictObject({
        candidate: z.string().min(1).describe('a registered policy version'),
        sampleRate: z.number().gt(0).max(1).default(1).describe('the share of rollouts mirrored, each one whole'),
      })
      .parse(req.body);
    return router.setMirror(req.params.alias, candidate, sampleRate);
  });
  app.delete<{ Params: { alias: string } }>('/api/mirrors/:alias', { preHandler: requireAdmin }, async (req) => {
    const removed = router.clearMirror(req.params.alias);
    if (!removed) {
      throw new GatewayHttpError(404, 'mirror_not_found', `alias ${req.params.alias} is not mirrored; GET /api/mirrors lists the mirrors`);
    }
    return removed;
  });
  // Pages of at most `limit` (default 100, at most 500) in the order they were recorded; `next`
  // is the `after` of the following page, null on the last.
  app.get('/api/shadow-calls', { preHandler: requireAdmin }, async (req) => {
    const { limit, ...filter } = shadowCallsQuery.parse(req.query);
    const items = await store.listShadowCalls({ ...filter, limit: limit + 1 });
    const page = items.slice(0, limit);
    return { items: page, next: items.length > limit ? (page.at(-1)?.id ?? null) : null };
  });

  const startedAt = Date.now();
  const lostCalls = options.markLostCalls === false ? 0 : await store.markLostCalls(startedAt, 'the gateway stopped while this call was in flight (found by the next gateway on start)');
  const url = await app.listen({ host: listen.host, port: listen.port });
  publicUrl ||= url;
  return {
    app,
    router,
    keys,
    url: publicUrl,
    lostCalls,
    tracing,
    async close() {
      await app.close();
      await proxy.close();
      await tracing?.close();
    },
  };
}

function pathClaimOf(params: { rolloutId: string; attempt: string }): RolloutKeyClaim {
  const attempt = Number(params.attempt);
  if (!Number.isInteger(attempt) || attempt < 1) {
    throw new GatewayHttpError(400, 'invalid_attempt', `attempt must be a positive integer, got "${params.attempt}"`);
  }
  return { rolloutId: params.rolloutId, attempt };
}

async function requireRollout(store: TraceStore, id: string) {
  const rollout = await store.getRollout(id);
  if (!rollout) throw new GatewayHttpError(404, 'rollout_not_found', `rollout ${id} does not exist`);
  return rollout;
}

function policyStatus(router: Router, version: string) {
  const status = router.status().find((p) => p.policyVersion === version);
  if (!status) throw new GatewayHttpError(404, 'policy_not_found', `policy ${version} is not in the routing table`);
  return status;
}

/** The key a caller presents: `Authorization: Bearer`, or the `api-key` / `x-api-key` headers. */
function credentialOf(req: FastifyRequest): string | undefined {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ')) return auth.slice(7).trim() || undefined;
  const header = req.headers['api-key'] ?? req.headers['x-api-key'];
  return typeof header === 'string' && header ? header : undefined;
}

/** How long a request may take to arrive, and Rein's error shape for what fails before a route. */
function connectionOptions(requestTimeoutMs: number) {
  return {
    requestTimeout: requestTimeoutMs,
    // Node checks for timed-out requests this often (its default, 30 s, would let a short limit run long).
    http: { requestTimeout: requestTimeoutMs, headersTimeout: Math.min(60_000, requestTimeoutMs), connectionsCheckingInterval: Math.min(1000, requestTimeoutMs) },
    clientErrorHandler: clientErrorAnswer({ body: errorBody, timeoutSetting: 'gateway.requestTimeoutMs' }),
    frameworkErrors: (err: Error, _req: FastifyRequest, reply: FastifyReply) => {
      const { status, code, message } = describeError(err);
      void reply.code(status).send(errorBody(status, code, message));
    },
  };
}

/** A request body: one JSON value, nested no deeper than the gateway (and its journal) can walk. */
function parseJsonBody(text: string): unknown {
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new GatewayHttpError(400, 'json_too_deep', `the JSON body nests deeper than ${MAX_JSON_DEPTH} levels; send a flatter one`);
  }
  try {
    // A key named __proto__ stays a plain key here (JSON.parse makes it an own property), as it does for the backend.
    return JSON.parse(text);
  } catch (err) {
    throw new GatewayHttpError(400, 'malformed_json', `malformed JSON body (${(err as Error).message}); send one JSON object`);
  }
}

function errorBody(status: number, code: string, message: string) {
  // An unknown model is answered as the backend (vLLM) answers it, so a harness handles it the same.
  if (code === 'model_not_found') return { error: { message, type: 'NotFoundError', param: null, code: 404 } };
  return { error: { message, type: status >= 500 ? 'api_error' : 'invalid_request_error', code, param: null } };
}

function describeError(err: unknown): { status: number; code: string; message: string; headers: Record<string, string> } {
  if (err instanceof GatewayHttpError) return { status: err.status, code: err.code, message: err.message, headers: err.headers };
  if (err instanceof RoutingError) {
    return {
      status: err.status,
      code: err.code,
      message: err.message,
      headers: err.retryAfterSeconds === undefined ? {} : { 'retry-after': String(err.retryAfterSeconds) },
    };
  }
  if (err instanceof ZodError) {
    const problems = err.issues.map((i) => `${i.path.length ? i.path.join('.') : '(body)'}: ${i.message}`);
    return { status: 400, code: 'invalid_request', message: `invalid request: ${problems.join('; ')}`, headers: {} };
  }
  const e = err as { statusCode?: number; status?: number; code?: string; message?: string };
  const status = e.statusCode ?? e.status;
  if (e.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || (err instanceof SyntaxError && status === 400)) {
    return { status: 400, code: 'malformed_json', message: `malformed JSON body (${e.message ?? 'parse error'}); send one JSON object`, headers: {} };
  }
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return { status: 413, code: 'body_too_large', message: `request body too large; the gateway's limit is gateway.bodyLimitBytes`, headers: {} };
  }
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return { status, code: e.code ?? 'bad_request', message: e.message ?? 'bad request', headers: {} };
  }
  if (e.code === 'FST_ERR_MAX_PARAM_LENGTH') return { status: 414, code: 'uri_too_long', message: 'a part of the URL is too long', headers: {} };
  if (e.code === 'FST_ERR_BAD_URL') return { status: 400, code: 'bad_url', message: 'the URL is not valid (it does not decode)', headers: {} };
  // The details are in the gateway's log, not in the answer: they are internals.
  return { status: 500, code: 'gateway_error', message: 'the gateway failed to handle the request; its log has the details', headers: {} };
}

/** For hijacked proxy replies: an error before any byte went out becomes an OpenAI error body. */
function sendRawError(res: ServerResponse, err: unknown, callId?: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { status, code, message, headers } = describeError(err);
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(errorBody(status, code, callId === undefined ? message : `${message} (call ${callId})`)));
}

/** A backend endpoint's model cards by id; none when it cannot say (the list then shows what the gateway knows). */
async function backendModels(route: Route): Promise<Map<string, Record<string, unknown>>> {
  try {
    const res = await fetch(`${route.endpoint.replace(/\/+$/, '')}/models`, {
      signal: AbortSignal.timeout(3000),
      headers: route.backend.apiKey ? { authorization: `Bearer ${route.backend.apiKey}` } : {},
    });
    const body = (await res.json()) as { data?: unknown };
    const cards = Array.isArray(body.data) ? body.data.filter((c): c is Record<string, unknown> => c !== null && typeof c === 'object' && typeof (c as { id?: unknown }).id === 'string') : [];
    return new Map(cards.map((c) => [c.id as string, c]));
  } catch {
    return new Map();
  }
}

/** Why a backend endpoint cannot answer now (unreachable or failing); null when it can. */
async function backendProblem(route: Route): Promise<string | null> {
  const url = `${route.endpoint.replace(/\/+$/, '')}/models`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3000), headers: route.backend.apiKey ? { authorization: `Bearer ${route.backend.apiKey}` } : {} });
    if (!res.ok) return `backend ${route.backendName} at ${route.endpoint} answered ${res.status} to GET /models`;
    // A backend that lost the model answers too: waiting would not bring it back (Rein loads it again).
    return null;
  } catch (err) {
    return `backend ${route.backendName} at ${route.endpoint} is unreachable (${(err as Error).message})`;
  }
}
