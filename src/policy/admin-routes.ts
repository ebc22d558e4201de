import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { routingName } from '../gateway/config.js';
import { matchesHash, sha256Hex } from '../gateway/keys.js';
import type { PolicyServerMetrics } from '../metrics/policy-server-metrics.js';
import { exposition } from '../metrics/registry.js';
import type { ModelList } from './openai-replies.js';
import { HttpError } from './policy-http.js';
import type { ServedModels } from './served-models.js';

export type AdminRouteOptions = {
  models: ServedModels;
  metrics: PolicyServerMetrics;
  /** The key loading and unloading versions needs; without one, those endpoints refuse. */
  adminKey: string | undefined;
};

/**
 * What vLLM answers besides generation: the served models, loading and unloading them (as LoRA adapters are), health
 * and metrics.
 */
export async function adminRoutes(app: FastifyInstance, options: AdminRouteOptions): Promise<void> {
  const { models, metrics } = options;
  const adminKeyHash = options.adminKey ? sha256Hex(options.adminKey) : undefined;
  const requireAdmin = (headers: { authorization?: string | undefined; 'x-api-key'?: unknown }) => {
    if (!adminKeyHash) {
      throw new HttpError(
        403,
        'PermissionDeniedError',
        'loading and unloading versions is off on this server: start it with an admin key (REIN_POLICY_SERVER_KEY, or `rein policy serve --admin-key-env NAME`)',
      );
    }
    // Anthropic's SDKs send their key as x-api-key, OpenAI's as a bearer token: either one.
    const apiKey = typeof headers['x-api-key'] === 'string' ? headers['x-api-key'] : '';
    const given = /^Bearer (.+)$/.exec(headers.authorization ?? '')?.[1] ?? apiKey;
    if (!matchesHash(given, adminKeyHash))
      throw new HttpError(
        401,
        'AuthenticationError',
        'loading and unloading versions needs the admin key: send Authorization: Bearer <key> (or x-api-key: <key>)',
      );
  };

  app.get('/v1/models', async (): Promise<ModelList> => ({
    object: 'list',
    data: models.entries().map(([id, c]) => ({
      id,
      object: 'model',
      created: 0,
      owned_by: 'rein',
      root: id,
      parent: null,
      max_model_len: c.config.maxPositions,
    })),
  }));

  // A served model's name is a routing name like any other (the gateway routes to it by that name).
  const loadBody = z.object({ lora_name: routingName, lora_path: z.string().min(1) });
  app.post('/v1/load_lora_adapter', async (req) => {
    requireAdmin(req.headers);
    const { lora_name, lora_path } = loadBody.parse(req.body);
    try {
      await models.loadFrom(lora_name, lora_path);
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw new HttpError(400, 'BadRequestError', (err as Error).message);
    }
    return `Success: model ${lora_name} loaded from ${lora_path}`;
  });
  app.post('/v1/unload_lora_adapter', async (req) => {
    requireAdmin(req.headers);
    const { lora_name } = z.object({ lora_name: routingName }).parse(req.body);
    models.unload(lora_name);
    return `Success: model ${lora_name} unloaded`;
  });
  app.get('/health', async () => ({ ok: true }));
  // Open like vLLM's /metrics: the server listens where only Rein and its harnesses reach it.
  app.get('/metrics', async (_req, reply) => {
    const { contentType, text } = await exposition(metrics.registry);
    return reply.type(contentType).send(text);
  });
}
