import Fastify, { type FastifyInstance } from 'fastify';
import { createLogger, type Logger } from '../log/logger.js';
import { GatewayMetrics } from '../metrics/gateway-metrics.js';
import { exposition } from '../metrics/registry.js';
import { ROLLOUT_ID_MAX_LENGTH } from '../rollouts/rollout-id.js';
import type { TraceStore } from '../store/trace-store.js';
import { GatewayTracing, type TracingOptions } from '../telemetry/gateway-tracing.js';
import type { CoordinationStore } from '../store/coordination-store.js';
import { controlRoutes } from './control-api.js';
import { backendAdmission, coordinationBeside } from './coordination.js';
import { GatewayCredentials } from './credentials.js';
import { connectionOptions, describeError, errorBodyFor, isGatewayFailure, logGatewayFailure } from './errors.js';
import type { GatewayContext } from './gateway-context.js';
import type { MembershipTiming } from './gateway-membership.js';
import { RolloutKeys } from './keys.js';
import { launchSlotRoutes } from './launch-slot-routes.js';
import { policyRoutes } from './policy-routes.js';
import { ModelCallProxy } from './proxy.js';
import { jsonBodyParser, proxyRoutes } from './proxy-routes.js';
import type { RedactionRule } from './redact.js';
import { RedactingStore } from './redacting-store.js';
import { rolloutRoutes } from './rollout-routes.js';
import { Router, ROUTING_NAME_MAX_LENGTH, type RoutingTable } from './routing.js';
import { serveControl } from './serve-control.js';

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
  /**
   * Longest a harness may take to send one whole request (headers and body); default 30 s. A slow sender holds a
   * connection, not the gateway.
   */
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
  /**
   * Where gateways sharing a store meet (backend limits) and workers take launch slots; default: beside the trace
   * store, on its database.
   */
  coordination?: CoordinationStore | undefined;
  /** How often this gateway's heartbeat row is written, and when a silent one is counted gone (tests shorten them). */
  membershipTiming?: MembershipTiming;
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

/** Builds and starts the gateway: the OpenAI-compatible proxy and the rollout control API. */
export async function startGateway(options: GatewayOptions, listen: { host: string; port: number }): Promise<Gateway> {
  const router = new Router(options.routing, options.retryAfterSeconds);
  const keys = new RolloutKeys(options.secret);
  // Every write the gateway journals goes through redaction (see RedactingStore).
  const store = new RedactingStore(options.store, options.redaction ?? []);
  const metrics = new GatewayMetrics();
  const log = options.logger ?? createLogger('warn', 'gateway');
  const tracing =
    options.tracing && new GatewayTracing(options.tracing, { store, redaction: options.redaction ?? [], log });
  const coordination = options.coordination ?? (await coordinationBeside(options.store));
  const { limits, membership } = await backendAdmission(options.routing, coordination, log, options.membershipTiming);
  const proxy = new ModelCallProxy({
    store,
    router,
    redaction: options.redaction ?? [],
    headersTimeoutMs: options.headersTimeoutMs ?? 600_000,
    bodyTimeoutMs: options.bodyTimeoutMs ?? 120_000,
    ...(options.maxShadowsInFlight !== undefined && { maxShadowsInFlight: options.maxShadowsInFlight }),
    metrics,
    tracing,
    limits,
  });
  let publicUrl = options.publicUrl ?? '';
  const context: GatewayContext = {
    store,
    router,
    credentials: new GatewayCredentials(keys, options.adminKeyHash, store),
    proxy,
    metrics,
    tracing,
    log,
    rawBodies: new WeakMap(),
    coordination,
    publicUrl: () => publicUrl,
  };
  const app = buildApp(options, context);

  const startedAt = Date.now();
  const lostCalls =
    options.markLostCalls === false
      ? 0
      : await store.markLostCalls(
          startedAt,
          'the gateway stopped while this call was in flight (found by the next gateway on start)',
        );
  const url = await app.listen({ host: listen.host, port: listen.port }).catch(async (err: unknown) => {
    // A member that never serves would hold every other gateway's admissions until its row expired.
    await membership?.close();
    throw err;
  });
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
      await membership?.close();
      await proxy.close();
      await tracing?.close();
    },
  };
}

/** The gateway's HTTP server: Rein's error shape everywhere, and its routes by concern. */
function buildApp(options: GatewayOptions, context: GatewayContext): FastifyInstance {
  // Route parameters as long as the longest rollout id and routing name (Fastify's default, 100, answered 414).
  const app = Fastify({
    bodyLimit: options.bodyLimitBytes ?? 32 * 1024 * 1024,
    logger: false,
    ...connectionOptions(options.requestTimeoutMs ?? 30_000),
    routerOptions: { maxParamLength: Math.max(ROLLOUT_ID_MAX_LENGTH, ROUTING_NAME_MAX_LENGTH) },
  });
  jsonBodyParser(app, context.rawBodies);
  app.setErrorHandler((err, req, reply) => {
    const described = describeError(err);
    const { status, code, message, headers } = described;
    const callId = isGatewayFailure(described) ? logGatewayFailure(context.log, err, req, reply.raw) : undefined;
    void reply
      .code(status)
      .headers(headers)
      .send(errorBodyFor(req.url, status, code, callId === undefined ? message : `${message} (call ${callId})`));
  });
  // Errors Fastify raises before any route (a URL it cannot decode, a parameter too long) in Rein's shape too.
  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send(errorBodyFor(req.url, 404, 'not_found', `no route ${req.method} ${req.url}`));
  });

  serveControl(app, controlRoutes.health, undefined, async () => ({ ok: true as const }));
  // Prometheus scrapes with the admin key (a bearer token): this port faces the harnesses, code the trained model
  // drives.
  app.get('/metrics', { preHandler: context.credentials.requireAdmin }, async (_req, reply) => {
    const { contentType, text } = await exposition(context.metrics.registry);
    return reply.type(contentType).send(text);
  });
  void app.register(proxyRoutes, context);
  void app.register(rolloutRoutes, context);
  void app.register(policyRoutes, context);
  void app.register(launchSlotRoutes, context);
  return app;
}
