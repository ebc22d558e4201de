import type { Client } from '@temporalio/client';
import { clientErrorAnswer } from '../http/client-error.js';
import { nestedDeeperThan } from '../gateway/json-text.js';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { z, ZodError, type ZodType } from 'zod';
import { describeRun, listRuns, newRunId, PromotionConflictError, promotionGuard, promotionMemo, resumeRun, RunExistsError, RunNotFoundError, RunNotResumableError, signalRun, startRun, trainingRunInput } from '../client/runs.js';
import { releaseInput, startRelease } from '../client/release.js';
import { ScheduleError } from '../client/schedule-error.js';
import { changeSchedule, createSchedule, listSchedules } from '../client/schedules.js';
import { ConfigError } from '../config/load.js';
import type { ReinConfig } from '../config/schema.js';
import { matchesHash } from '../gateway/keys.js';
import { decisionIdFor } from '../gate/release-ids.js';
import { gatewayControlFromConfig } from '../gateway/from-config.js';
import { openLedger } from '../ledger/open.js';
import { openRegistry } from '../registry/open.js';
import { openedOnFirstUse, type PolicyRegistry } from '../registry/policy-registry.js';
import { storeLocation } from '../store/location.js';
import { PRODUCTION_ALIAS, promote, PromotionError, rollback, type AliasMove } from '../registry/promotion.js';
import { notifyAliasMove } from '../notify/alias-move.js';
import { createLogger } from '../log/logger.js';
import * as s from './schemas.js';
import { iterationWorkflows, type IterationWorkflow } from '../client/iterations.js';
import { workflowUrl } from '../cli/context.js';
import { registerConsole } from '../console/serve.js';
import { decisionPairs } from '../console/decision-pairs.js';
import { rolloutView } from '../console/rollout-view.js';
import { artifactStoreFromConfig } from '../artifacts/from-config.js';
import type { ArtifactStore } from '../artifacts/artifact-store.js';
import { runView } from '../console/run-view.js';
import { GatewayRequestError } from '../gateway/control-client.js';

export interface ApiOptions {
  config: ReinConfig;
  client: Client;
  /** SHA-256 (hex) of the key callers send as `Authorization: Bearer <key>`. */
  keyHash: string;
  /** The Temporal Web UI's address, when known (the console links each workflow there). */
  temporalUiUrl?: string;
}

export interface ApiServer {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface Route {
  method: 'GET' | 'POST' | 'DELETE';
  url: string;
  summary: string;
  params?: ZodType;
  query?: ZodType;
  body?: ZodType;
  status?: number;
  response: ZodType;
  handle(input: { params: never; query: never; body: never }): Promise<unknown>;
}

/** A route whose handler sees its inputs as the schemas parse them. */
function route<P extends ZodType = ZodType<undefined>, Q extends ZodType = ZodType<undefined>, B extends ZodType = ZodType<undefined>>(definition: {
  method: Route['method'];
  url: string;
  summary: string;
  params?: P;
  query?: Q;
  body?: B;
  status?: number;
  response: ZodType;
  handle(input: { params: z.output<P>; query: z.output<Q>; body: z.output<B> }): Promise<unknown>;
}): Route {
  return definition as unknown as Route;
}

/**
 * Rein's HTTP API: the operations of the CLI (start, list, inspect, pause, resume and stop runs;
 * schedules; policies) over JSON, validated by zod, described by an OpenAPI document built from
 * the same schemas (`GET /openapi.json`).
 */
export function buildApi(options: ApiOptions): FastifyInstance {
  const { config, client } = options;
  const taskQueue = config.temporal.taskQueue;
  // One registry and one ledger for the API's life (on PostgreSQL, a connection pool each), opened when first asked for.
  const registryStore = openedOnFirstUse(() => openRegistry(storeLocation(config)));
  const ledgerStore = openedOnFirstUse(() => openLedger(storeLocation(config)));
  const registry = async <T>(use: (r: PolicyRegistry) => T | Promise<T>) => use(await registryStore.get());
  const completedIterations = new Map<string, IterationWorkflow>();
  let artifacts: ArtifactStore | undefined;
  // The console reads rollouts from the gateway's journal, with the admin key workers use.
  const gateway = () => {
    const control = gatewayControlFromConfig(config.gateway);
    if (!control) throw new ApiError(503, 'gateway_unavailable', 'rollouts are read from the gateway, and no admin key for it can be read here: set REIN_GATEWAY_ADMIN_KEY (the gateway has only gateway.adminKeyHash)');
    return control;
  };
  // The webhook hears of a move made here after the answer: its retries must not hold the caller.
  let notifyLog: ReturnType<typeof createLogger> | undefined;
  const told = (move: AliasMove) => {
    void notifyAliasMove(config.notifications, move, (problem) => (notifyLog ??= createLogger(config.log.level, 'api')).warn(problem));
    return move;
  };
  const overrides = (b: z.output<typeof s.runSizes>) => ({ iterations: b.iterations, tasksPerIteration: b.tasksPerIteration, samplesPerTask: b.samplesPerTask, heldoutLimit: b.heldoutLimit });

  const routes: Route[] = [
    route({ method: 'GET', url: '/api/runs', summary: 'Training runs, newest first', query: s.listRunsQuery, response: z.object({ items: z.array(s.runListing) }), handle: async ({ query }) => ({ items: await listRuns(client, query.limit) }) }),
    route({
      method: 'POST',
      url: '/api/runs',
      summary: "Start a training run from the server's config (sizes may be overridden)",
      body: s.startRunBody,
      status: 201,
      response: s.startedRun,
      handle: async ({ body }) => startRun(client, taskQueue, { ...trainingRunInput(config, overrides(body)), runId: body.runId ?? newRunId() }, promotionGuard(config)),
    }),
    route({ method: 'GET', url: '/api/runs/:runId', summary: "A run's state, stage, iterations, held-out comparison and current activity", params: s.runIdParams, response: s.runReport, handle: async ({ params }) => describeRun(client, params.runId) }),
    route({
      method: 'GET',
      url: '/api/runs/:runId/iterations',
      summary: "A run's iterations joined with their workflows, trainer metrics, ledger rows and gate decisions: what the console plots",
      params: s.runIdParams,
      response: s.runView,
      handle: async ({ params }) => {
        const report = await describeRun(client, params.runId);
        const through = Math.max(report.status?.nextIteration ?? 1, ...(report.status?.iterations.map((i) => i.iteration) ?? []));
        const [workflows, executionRunId] = await Promise.all([iterationWorkflows(client, params.runId, through, { completed: completedIterations }), client.workflow.getHandle(params.runId).describe().then((d) => d.runId)]);
        const ledger = await (await ledgerStore.get()).list({ runId: params.runId });
        // The view joins in memory: the run's policies and the decisions its gates cite, read here.
        const { policies, decisions } = await registry(async (r) => {
          const ids = [...new Set((report.status?.iterations ?? []).flatMap((i) => (i.gate ? [i.gate.decisionId] : [])))];
          const found = await Promise.all(ids.map((id) => r.decision(id)));
          return { policies: await r.list({ runId: params.runId }), decisions: new Map(found.flatMap((d) => (d ? [[d.id, d] as const] : []))) };
        });
        return runView({
          report,
          executionRunId,
          workflows,
          policies,
          ledger,
          decision: (id) => decisions.get(id),
          workflowUrl: (id, run) => (options.temporalUiUrl ? workflowUrl(options.temporalUiUrl, config.temporal.namespace, id, run) : null),
        });
      },
    }),
    ...(['pause', 'stop'] as const).map((signal) =>
      route({
        method: 'POST',
        url: `/api/runs/:runId/${signal}`,
        summary: { pause: 'Pause a run between iterations', stop: 'Stop a run after its current iteration' }[signal],
        params: s.runIdParams,
        status: 202,
        response: s.accepted,
        handle: async ({ params }) => {
          await signalRun(client, params.runId, signal);
          return { ok: true };
        },
      }),
    ),
    route({
      method: 'POST',
      url: '/api/runs/:runId/resume',
      summary: 'Resume a paused run, or continue one that failed, was terminated, cancelled or timed out from its first unfinished iteration (a new execution under the same run id)',
      params: s.runIdParams,
      status: 202,
      response: s.resumedRun,
      handle: async ({ params }) => {
        const resumed = await resumeRun(client, params.runId, { allowConcurrentPromotion: config.gate.concurrentRuns === 'allow' });
        if (resumed.action === 'signalled') return resumed;
        const { fromIteration, policyVersion, previousStatus, reason, executionRunId } = resumed.continuation;
        return { action: resumed.action, fromIteration, policyVersion, previousStatus, reason, executionRunId };
      },
    }),
    route({ method: 'GET', url: '/api/policies', summary: 'Policy versions with their lineage', query: s.listPoliciesQuery, response: z.object({ items: z.array(s.policyRecord) }), handle: async ({ query }) => ({ items: await registry((r) => r.list(query.runId === undefined ? {} : { runId: query.runId })) }) }),
    route({ method: 'GET', url: '/api/aliases', summary: 'Where each alias points, and every move (promotions, rollbacks, overrides)', response: s.aliases, handle: async () => registry(async (r) => ({ aliases: await r.aliases(), history: await r.aliasHistory() })) }),
    route({
      method: 'POST',
      url: '/api/policies/:version/promote',
      summary: 'Move production to a version: needs a passing gate decision against the current production, or an override (recorded)',
      params: s.versionParams,
      body: s.promoteBody,
      response: s.aliasMove,
      handle: async ({ params, body }) =>
        told(
          await registry((r) =>
            promote(r, gatewayControlFromConfig(config.gateway), { version: params.version, actor: 'api', ...(body?.decisionId && { decisionId: body.decisionId }), ...(body?.override && { override: body.override }) }),
          ),
        ),
    }),
    route({
      method: 'POST',
      url: '/api/production/rollback',
      summary: 'Move production back to the version it served before the current one',
      body: s.rollbackBody,
      response: s.aliasMove,
      handle: async ({ body }) => told(await registry((r) => rollback(r, gatewayControlFromConfig(config.gateway), { actor: 'api', ...(body?.reason && { reason: body.reason }) }))),
    }),
    route({
      method: 'POST',
      url: '/api/releases',
      summary: 'Replay held-out tasks with a candidate and with production, apply the gate, promote on a pass when asked',
      body: s.releaseBody,
      status: 202,
      response: s.startedRelease,
      handle: async ({ body }) => {
        const input = releaseInput(config, body.candidate, { promote: body.promote, heldoutLimit: body.heldoutLimit, actor: 'api' });
        const incumbent = (await registry((r) => r.alias(PRODUCTION_ALIAS))) ?? config.run.base.version;
        return { workflowId: await startRelease(client, taskQueue, input), decisionId: decisionIdFor(body.candidate, incumbent, input.configHash, input.heldout.taskIds.length, input.samplesPerTask) };
      },
    }),
    route({
      method: 'GET',
      url: '/api/decisions/:decisionId',
      summary: 'A gate decision: rules, checks, evidence and the rollouts behind each number',
      params: s.decisionParams,
      response: s.decision,
      handle: async ({ params }) => {
        const found = await registry((r) => r.decision(params.decisionId));
        if (!found) throw new ApiError(404, 'decision_not_found', `no gate decision ${params.decisionId}`);
        return found;
      },
    }),
    route({
      method: 'GET',
      url: '/api/decisions/:decisionId/pairs',
      summary: "A gate decision's held-out pairs, task by task: each side's rollout, reward and whether the candidate gained or lost the task",
      params: s.decisionParams,
      response: z.object({ items: z.array(s.decisionPair) }),
      handle: async ({ params }) => {
        const found = await registry((r) => r.decision(params.decisionId));
        if (!found) throw new ApiError(404, 'decision_not_found', `no gate decision ${params.decisionId}`);
        return { items: await decisionPairs(gateway(), found) };
      },
    }),
    route({
      method: 'GET',
      url: '/api/rollouts/:rolloutId',
      summary: "A rollout as the gateway journaled it (calls redacted as stored, without token ids), its events, and the harness's and verifier's logs",
      params: s.rolloutIdParams,
      response: s.rolloutView,
      // Logs come from the artifact store the workers upload to (any host), else from this machine's dataDir.
      handle: async ({ params }) => rolloutView(gateway(), { artifacts: (artifacts ??= artifactStoreFromConfig(config)), dataDir: config.dataDir }, params.rolloutId),
    }),
    route({ method: 'GET', url: '/api/ledger', summary: 'The model, harness and environment ledgers: a row per iteration and release', query: s.ledgerQuery, response: z.object({ items: z.array(s.ledgerEntry) }), handle: async ({ query }) => ({ items: await (await ledgerStore.get()).list(query.runId === undefined ? {} : { runId: query.runId }) }) }),
    route({ method: 'GET', url: '/api/schedules', summary: 'Training schedules with their next and recent runs', response: z.object({ items: z.array(s.scheduleListing) }), handle: async () => ({ items: await listSchedules(client) }) }),
    route({
      method: 'POST',
      url: '/api/schedules',
      summary: 'Schedule recurring training runs (overlap policy skip by default)',
      body: s.createScheduleBody,
      status: 201,
      response: s.accepted,
      handle: async ({ body }) => {
        const { scheduleId, every, cron, overlap, paused, note } = body;
        const input = trainingRunInput(config, overrides(body));
        await createSchedule(client, taskQueue, { scheduleId, every, cron, overlap, paused, note, input, ...promotionMemo(input, promotionGuard(config)) });
        return { ok: true };
      },
    }),
    ...(['pause', 'unpause', 'trigger'] as const).map((change) =>
      route({
        method: 'POST',
        url: `/api/schedules/:scheduleId/${change}`,
        summary: { pause: 'Stop a schedule firing', unpause: 'Let a schedule fire again', trigger: "Fire now (the schedule's overlap policy applies)" }[change],
        params: s.scheduleIdParams,
        body: s.scheduleChangeBody,
        status: 202,
        response: s.accepted,
        handle: async ({ params, body }) => {
          await changeSchedule(client, params.scheduleId, change, body?.note);
          return { ok: true };
        },
      }),
    ),
    route({
      method: 'DELETE',
      url: '/api/schedules/:scheduleId',
      summary: 'Delete a schedule (runs it started go on)',
      params: s.scheduleIdParams,
      response: s.accepted,
      handle: async ({ params }) => {
        await changeSchedule(client, params.scheduleId, 'delete');
        return { ok: true };
      },
    }),
  ];

  const app = Fastify({
    logger: false,
    bodyLimit: BODY_LIMIT_BYTES,
    // A malformed URL or an over-long path parameter, refused before any route: Rein's shape too.
    frameworkErrors: (err, _req, reply) => sendError(reply as FastifyReply, err),
    clientErrorHandler: clientErrorAnswer({ body: (_status, code, message) => ({ error: { code, message } }) }),
  });
  app.setErrorHandler((err, _req, reply) => sendError(reply, err));
  app.addHook('onClose', async () => {
    await registryStore.close();
    await ledgerStore.close();
  });
  const defaultJsonParser = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, text, done) => {
    if (nestedDeeperThan(text as string, MAX_BODY_DEPTH)) return done(new ApiError(400, 'invalid_request', `the JSON body is nested deeper than ${MAX_BODY_DEPTH} levels; the API's requests nest a few levels at most`));
    void defaultJsonParser(req, text as string, done);
  });
  app.setNotFoundHandler((req, reply) => void reply.code(404).send({ error: { code: 'not_found', message: `no route ${req.method} ${req.url}; GET /openapi.json lists them` } }));

  const requireKey = async (req: FastifyRequest) => {
    const header = req.headers.authorization;
    const key = header?.startsWith('Bearer ') ? header.slice(7).trim() : undefined;
    if (!key) throw new ApiError(401, 'missing_key', "send Authorization: Bearer <key> (the gateway's admin key)");
    if (!matchesHash(key, options.keyHash)) throw new ApiError(403, 'forbidden', 'this key may not use the API');
  };
  app.get('/healthz', async () => ({ ok: true }));
  registerConsole(app);
  const document = openApiDocument(routes);
  app.get('/openapi.json', async () => document);
  for (const r of routes) {
    app.route({
      method: r.method,
      url: r.url,
      preHandler: requireKey,
      handler: async (req, reply) => {
        const input = {
          params: (r.params ? parseInput(r.params, req.params, 'path') : undefined) as never,
          query: (r.query ? parseInput(r.query, req.query, 'query') : undefined) as never,
          body: (r.body ? parseInput(r.body, req.body ?? undefined, 'body') : undefined) as never,
        };
        const result = await r.handle(input);
        return reply.code(r.status ?? 200).send(result);
      },
    });
  }
  return app;
}

/** The API's requests are small settings objects. */
const BODY_LIMIT_BYTES = 1024 * 1024;
/** Deeper than any request of the API, shallow enough that nothing recursive (validation, error messages) can overflow. */
const MAX_BODY_DEPTH = 32;

function sendError(reply: FastifyReply, err: unknown): void {
  const { status, code, message } = describeError(err);
  void reply.code(status).send({ error: { code, message } });
}

/**
 * Requests Node's HTTP parser refuses before Fastify sees them (a URL or headers over its limit,
 * broken framing): answered on the socket, in Rein's shape, and the connection closed.
 */
export async function startApi(options: ApiOptions, listen: { host: string; port: number }): Promise<ApiServer> {
  const app = buildApi(options);
  const address = await app.listen(listen);
  return { app, url: address.replace('[::1]', 'localhost'), close: () => app.close() };
}

function parseInput(schema: ZodType, value: unknown, where: string): unknown {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const problems = result.error.issues.map((i) => `${where}${i.path.length ? `.${i.path.join('.')}` : ''}: ${i.message}`);
  throw new ApiError(400, 'invalid_request', problems.join('; '));
}

function describeError(err: unknown): { status: number; code: string; message: string } {
  if (err instanceof ApiError) return err;
  if (err instanceof RunNotFoundError) return { status: 404, code: 'run_not_found', message: err.message };
  if (err instanceof RunExistsError) return { status: 409, code: 'run_exists', message: err.message };
  if (err instanceof PromotionConflictError) return { status: 409, code: 'promotion_conflict', message: err.message };
  if (err instanceof RunNotResumableError) return { status: 409, code: 'run_not_resumable', message: err.message };
  if (err instanceof ScheduleError) return { status: /^no schedule/.test(err.message) ? 404 : /already exists/.test(err.message) ? 409 : 400, code: 'schedule', message: err.message };
  if (err instanceof PromotionError) return { status: /not registered|no gate decision/.test(err.message) ? 404 : 409, code: 'promotion_refused', message: err.message };
  if (err instanceof ConfigError) return { status: 400, code: 'config', message: err.message };
  // The console's rollouts come from the gateway: its refusals of the caller's input are the caller's (404 an unknown rollout), a gateway down or failing is a 502.
  if (err instanceof GatewayRequestError) {
    if (err.status === 404) return { status: 404, code: 'rollout_not_found', message: err.message };
    return err.status >= 400 && err.status < 500 ? { status: err.status, code: err.code, message: err.message } : { status: 502, code: err.code, message: err.message };
  }
  if (err instanceof ZodError) return { status: 400, code: 'invalid_request', message: err.issues.map((i) => i.message).join('; ') };
  const e = err as { statusCode?: number; code?: string; message?: string };
  // Fastify's own refusals: the caller's mistake, so its 4xx, named and explained.
  if (e.code === 'FST_ERR_BAD_URL') return { status: 400, code: 'invalid_request', message: `${e.message ?? 'the URL is not valid'}: a path segment has broken percent-encoding; encode it with encodeURIComponent` };
  if (e.code === 'FST_ERR_MAX_PARAM_LENGTH') return { status: 414, code: 'uri_too_long', message: 'a path parameter (run, schedule, version or decision id) is over 100 characters; no id is that long' };
  if (e.statusCode === 413) return { status: 413, code: 'body_too_large', message: `the request body is over the API's limit of ${BODY_LIMIT_BYTES / 1024 / 1024} MiB` };
  if (e.statusCode === 415) return { status: 415, code: 'unsupported_media_type', message: 'send the body as JSON, with content-type: application/json' };
  if (e.statusCode !== undefined && e.statusCode >= 400 && e.statusCode < 500) return { status: e.statusCode, code: 'invalid_request', message: e.message ?? 'bad request' };
  return { status: 500, code: 'internal', message: e.message ?? String(err) };
}

/** OpenAPI 3.1 (whose schemas are JSON Schema) from the route table. */
export function openApiDocument(routes: readonly Route[]): Record<string, unknown> {
  const json = (schema: ZodType, io: 'input' | 'output') => {
    const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
    return rest;
  };
  const parameters = (schema: ZodType | undefined, where: 'path' | 'query') => {
    if (!schema) return [];
    const shape = json(schema, 'input') as { properties?: Record<string, unknown>; required?: string[] };
    return Object.entries(shape.properties ?? {}).map(([name, property]) => ({ name, in: where, required: where === 'path' || (shape.required ?? []).includes(name), schema: property }));
  };
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const pathKey = r.url.replace(/:(\w+)/g, '{$1}');
    paths[pathKey] ??= {};
    (paths[pathKey] as Record<string, unknown>)[r.method.toLowerCase()] = {
      summary: r.summary,
      security: [{ bearer: [] }],
      parameters: [...parameters(r.params, 'path'), ...parameters(r.query, 'query')],
      ...(r.body && { requestBody: { required: !r.body.safeParse(undefined).success, content: { 'application/json': { schema: json(r.body, 'input') } } } }),
      responses: {
        [String(r.status ?? 200)]: { description: 'OK', content: { 'application/json': { schema: json(r.response, 'output') } } },
        default: { description: 'An error: 400 invalid request, 401/403 key, 404 unknown run or schedule, 409 conflict', content: { 'application/json': { schema: json(s.errorBody, 'output') } } },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Rein API', version: '1', description: 'Training runs, schedules and policies of a Rein installation.' },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: "The gateway's admin key" } } },
    paths,
  };
}
