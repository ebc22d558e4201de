import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { jsonParserNamingForbiddenKeys } from '../http/json-body-refusal.js';
import { ZodError } from 'zod';
import { clientErrorAnswer } from '../http/client-error.js';
import { PolicyServerMetrics } from '../metrics/policy-server-metrics.js';
import { adminRoutes } from './admin-routes.js';
import { chatRoute } from './chat-route.js';
import { completionRoute } from './completion-route.js';
import { messagesRoute } from './messages-route.js';
import { readyBackend } from './model.js';
import { responsesRoute } from './responses-route.js';
import { errorBody, HttpError } from './policy-http.js';
import { GenerationScheduler } from './scheduler.js';
import { ServedModels, type ArtifactSource } from './served-models.js';

/**
 * The embedded policy server: the parts of vLLM's OpenAI-compatible server that Rein and
 * harnesses use — chat and completions, streaming or not, `n`, temperature, top_p, max_tokens,
 * stop, seed, `return_token_ids`, log-probs and top log-probs, tool calls in the model's compact
 * syntax with `tool_choice` auto or none and `parallel_tool_calls` — and several policy versions
 * served by name, loaded and unloaded at runtime. Any other request field is a 400 naming it
 * (request-fields.ts).
 */
export interface PolicyServer {
  app: FastifyInstance;
  url: string;
  models(): string[];
  load(name: string, dir: string): void;
  /** Loads a checkpoint by path or URI: one in the artifact store (s3://) is staged to a local folder first. */
  loadFrom(name: string, ref: string): Promise<void>;
  unload(name: string): void;
  close(): Promise<void>;
}

export interface PolicyServerOptions {
  host: string;
  port: number;
  models?: Record<string, string>;
  maxBatchRows?: number;
  /**
   * The key loading and unloading versions needs (`Authorization: Bearer <key>`); without one,
   * those endpoints refuse: anyone on the host could otherwise unload what production serves.
   */
  adminKey?: string | undefined;
  /**
   * Where s3:// checkpoints and adapters are read from (the config's artifact store), and the
   * local folder they are staged into: the model code reads files. Without it, only paths load.
   */
  artifacts?: ArtifactSource | undefined;
}

const BODY_LIMIT_BYTES = 16 * 1024 * 1024;

export async function startPolicyServer(options: PolicyServerOptions): Promise<PolicyServer> {
  await readyBackend();
  const scheduler = new GenerationScheduler(options.maxBatchRows);
  const models = new ServedModels(scheduler, options.artifacts);
  for (const [name, ref] of Object.entries(options.models ?? {})) await models.loadFrom(name, ref);
  const metrics = new PolicyServerMetrics();
  const app = buildApp(metrics);
  const generator = { scheduler, metrics, models };
  void app.register(chatRoute, generator);
  void app.register(completionRoute, generator);
  void app.register(responsesRoute, generator);
  void app.register(messagesRoute, generator);
  void app.register(adminRoutes, { models, metrics, adminKey: options.adminKey });

  const url = await app.listen({ host: options.host, port: options.port });
  return {
    app,
    url: `${url}/v1`,
    models: () => models.names(),
    load: (name, dir) => models.load(name, dir),
    loadFrom: (name, ref) => models.loadFrom(name, ref),
    unload: (name) => models.unload(name),
    async close() {
      await app.close();
      models.disposeAll();
    },
  };
}

/** The server without its routes: vLLM's error shape for every refusal, and each answer counted. */
function buildApp(metrics: PolicyServerMetrics) {
  const app = Fastify({
    logger: false,
    bodyLimit: BODY_LIMIT_BYTES,
    // Errors the router meets before any route (a URL that does not decode) answer in the same shape.
    frameworkErrors: (err, _req, reply) => {
      const status = err.statusCode ?? 400;
      void (reply as FastifyReply).code(status).send(errorBody(status, 'BadRequestError', err.message));
    },
    // So do requests Node's HTTP parser refuses (a URL or headers over its limit: 431, bad framing: 400).
    clientErrorHandler: clientErrorAnswer({
      body: (status, _code, message) => errorBody(status, 'BadRequestError', message),
    }),
  });

  // A key named __proto__ is refused, and said so (Fastify's own words read as a syntax error).
  const jsonParser = jsonParserNamingForbiddenKeys(app);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, text, done) =>
    jsonParser(req, text as string, done),
  );
  app.setErrorHandler((err, _req, reply) => {
    const { code, type, message } = describeError(err);
    void reply.code(code).send(errorBody(code, type, message));
  });
  // Streams are answered on the raw response (hijacked), which Fastify's onResponse hook never sees.
  app.addHook('onRequest', async (req, reply) => {
    reply.raw.once('finish', () => metrics.answered(req.routeOptions.url ?? '', reply.raw.statusCode));
  });
  app.setNotFoundHandler(
    (req, reply) =>
      void reply
        .code(404)
        .send(errorBody(404, 'NotFoundError', `no route ${req.method} ${req.url.split('?')[0] ?? ''}`)),
  );
  return app;
}

function describeError(err: unknown): { code: number; type: string; message: string } {
  const status = (err as { statusCode?: number }).statusCode;
  if (err instanceof HttpError) return { code: err.status, type: err.type, message: err.message };
  if (err instanceof ZodError)
    return {
      code: 400,
      type: 'BadRequestError',
      message: err.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; '),
    };
  if (status === 413)
    return {
      code: 413,
      type: 'BadRequestError',
      message: `the request body is over the limit of ${BODY_LIMIT_BYTES} bytes; send a shorter prompt`,
    };
  if (status !== undefined && status >= 400 && status < 500)
    return { code: status, type: 'BadRequestError', message: (err as Error).message };
  return { code: 500, type: 'InternalServerError', message: (err as Error).message };
}
