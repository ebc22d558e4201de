import swagger from '@fastify/swagger';
import { jsonParserNamingForbiddenKeys } from '../http/json-body-refusal.js';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { serializerCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { registerConsole } from '../console/serve.js';
import { matchesHash } from '../gateway/keys.js';
import { nestedDeeperThan } from '../gateway/json-text.js';
import { clientErrorAnswer } from '../http/client-error.js';
import { apiContext, type ApiContext, type ApiOptions } from './context.js';
import { ApiError, BODY_LIMIT_BYTES, MAX_BODY_DEPTH, sendError } from './errors.js';
import { openApiOptions } from './openapi.js';
import { evidenceRoutes } from './routes/evidence.js';
import { policyRoutes } from './routes/policies.js';
import { runRoutes } from './routes/runs.js';
import { scheduleRoutes } from './routes/schedules.js';
import { zodValidatorCompiler } from './validation.js';

export type { ApiOptions } from './context.js';

export interface ApiServer {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

/**
 * Rein's HTTP API: the operations of the CLI (start, list, inspect, pause, resume and stop runs;
 * schedules; policies) over JSON. Each route's zod schemas validate its request, type its handler
 * (fastify-type-provider-zod), shape its answer and make the OpenAPI document (`GET /openapi.json`).
 */
export function buildApi(options: ApiOptions): FastifyInstance {
  const context = apiContext(options);
  const app = Fastify({
    logger: false,
    bodyLimit: BODY_LIMIT_BYTES,
    // A malformed URL or an over-long path parameter, refused before any route: Rein's shape too.
    frameworkErrors: (err, _req, reply) => sendError(reply as FastifyReply, err),
    clientErrorHandler: clientErrorAnswer({ body: (_status, code, message) => ({ error: { code, message } }) }),
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(zodValidatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setErrorHandler((err, _req, reply) => sendError(reply, err));
  app.addHook('onClose', () => context.close());
  refuseDeepJson(app);
  app.setNotFoundHandler(
    (req, reply) =>
      void reply.code(404).send({
        error: { code: 'not_found', message: `no route ${req.method} ${req.url}; GET /openapi.json lists them` },
      }),
  );

  app.get('/healthz', async () => ({ ok: true }));
  registerConsole(app);
  void app.register(swagger, openApiOptions());
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  void app.register(apiRoutes, { context, keyHash: options.keyHash });
  return app;
}

export async function startApi(options: ApiOptions, listen: { host: string; port: number }): Promise<ApiServer> {
  const app = buildApi(options);
  const address = await app.listen(listen);
  return { app, url: address.replace('[::1]', 'localhost'), close: () => closeWithin(app, CLOSE_GRACE_MS) };
}

/** How long requests in flight get to finish when the API stops. */
const CLOSE_GRACE_MS = 2_000;

/**
 * Stops the API: idle connections close at once, requests in flight get `graceMs`, then every connection still open
 * is closed. A client that stalls (a half-sent request, a response it does not read) must not hold a Ctrl-C for the
 * minute Node's own timeouts take.
 */
async function closeWithin(app: FastifyInstance, graceMs: number): Promise<void> {
  const force = setTimeout(() => app.server.closeAllConnections(), graceMs);
  try {
    await app.close();
  } finally {
    clearTimeout(force);
  }
}

/** The `/api/` routes, each group in its own plugin, behind the admin key. */
async function apiRoutes(
  app: FastifyInstance,
  { context, keyHash }: { context: ApiContext; keyHash: string },
): Promise<void> {
  // Before validation, as before any handler: a caller without the key learns nothing about its request.
  app.addHook('preValidation', async (req: FastifyRequest) => {
    const header = req.headers.authorization;
    const key = header?.startsWith('Bearer ') ? header.slice(7).trim() : undefined;
    if (!key) throw new ApiError(401, 'missing_key', "send Authorization: Bearer <key> (the gateway's admin key)");
    if (!matchesHash(key, keyHash)) throw new ApiError(403, 'forbidden', 'this key may not use the API');
  });
  await app.register(runRoutes, { context });
  await app.register(policyRoutes, { context });
  await app.register(evidenceRoutes, { context });
  await app.register(scheduleRoutes, { context });
}

/** JSON bodies nested deeper than any request of the API are refused before they are parsed. */
function refuseDeepJson(app: FastifyInstance): void {
  const jsonParser = jsonParserNamingForbiddenKeys(app);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, text, done) => {
    if (nestedDeeperThan(text as string, MAX_BODY_DEPTH))
      return done(
        new ApiError(
          400,
          'invalid_request',
          `the JSON body is nested deeper than ${MAX_BODY_DEPTH} levels; the API's requests nest a few levels at most`,
        ),
      );
    jsonParser(req, text as string, done);
  });
}
