import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SAMPLES_MERGE } from '../rollouts/rollout.js';
import type { CallEndpoint } from '../store/trace-store.js';
import { refuseClosedAttempt } from './admission.js';
import { StoreConflictError } from '../store/trace-store.js';
import { credentialOf } from './credentials.js';
import { describeError, GatewayHttpError, isGatewayFailure, logGatewayFailure, sendRawError } from './errors.js';
import type { GatewayContext } from './gateway-context.js';
import { MAX_JSON_DEPTH, nestedDeeperThan } from './json-text.js';
import type { RolloutKeyClaim } from './keys.js';
import type { ModelCard, ModelList, RequestBody } from './openai-types.js';
import type { Route } from './routing.js';

const ENDPOINTS: Array<[string, CallEndpoint]> = [
  ['chat/completions', 'chat.completions'],
  ['completions', 'completions'],
  ['responses', 'responses'],
  ['messages', 'messages'],
];

type PathClaimParams = { Params: { rolloutId: string; attempt: string } };

/**
 * Every JSON body is parsed here, control API included: one JSON value, nested no deeper than the
 * gateway (and its journal) can walk, and its bytes kept for the backend.
 */
export function jsonBodyParser(app: FastifyInstance, rawBodies: WeakMap<IncomingMessage, string>): void {
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
}

/**
 * The OpenAI-compatible API harnesses call: chat, completions and responses, forwarded and
 * journaled by the proxy, and the model list; each also under
 * `/rollouts/{id}/attempts/{n}/v1/…` for harnesses that cannot set a key.
 */
export async function proxyRoutes(app: FastifyInstance, context: GatewayContext): Promise<void> {
  const { store, credentials, proxy, rawBodies, log } = context;

  const proxyCall = async (
    req: FastifyRequest,
    reply: FastifyReply,
    endpoint: CallEndpoint,
    pathClaim?: RolloutKeyClaim,
  ) => {
    const claim = await credentials.authorizeCall(req, pathClaim);
    const body = req.body;
    const text = rawBodies.get(req.raw);
    if (body === null || typeof body !== 'object' || Array.isArray(body) || text === undefined) {
      throw new GatewayHttpError(
        400,
        'invalid_body',
        'the request body must be a JSON object (sent as content-type application/json)',
      );
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
          body: body as RequestBody,
          text,
          headers: req.headers,
          pinnedPolicyVersion: rollout.policyVersion,
          tokenIn: rollout.metadata[SAMPLES_MERGE] === 'tito',
          signal: controller.signal,
        },
        res,
      );
    } catch (err) {
      // A failure of the gateway itself is logged with the call it happened to (the error handler never sees a hijacked
      // reply).
      const callId = isGatewayFailure(describeError(err)) ? logGatewayFailure(log, err, req, res) : undefined;
      sendRawError(res, err, req.url, callId);
    }
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
    app.post<PathClaimParams>(`/rollouts/:rolloutId/attempts/:attempt/v1/${path}`, (req, reply) =>
      proxyCall(req, reply, endpoint, pathClaimOf(req.params)),
    );
  }
  app.get('/v1/models', (req) => listModels(context, req));
  app.get<PathClaimParams>('/rollouts/:rolloutId/attempts/:attempt/v1/models', (req) =>
    listModels(context, req, pathClaimOf(req.params)),
  );
}

/**
 * Each alias and version with its backend's model card (context length, root, …) as the backend lists it, under the
 * name the harness uses.
 */
async function listModels(
  context: GatewayContext,
  req: FastifyRequest,
  pathClaim?: RolloutKeyClaim,
): Promise<ModelList> {
  const { credentials, router } = context;
  const key = credentialOf(req);
  if (!pathClaim && !credentials.isAdmin(key) && !(key && credentials.keys.verify(key))) {
    throw new GatewayHttpError(401, 'invalid_key', 'send a rollout key (or the admin key) to list models');
  }
  if (pathClaim) await credentials.authorizeCall(req, pathClaim);
  const cards = new Map<string, Promise<Map<string, ModelCard>>>();
  const data = await Promise.all(
    router.models().map(async (m) => {
      const route = router.routesOf(m.policyVersion)?.[0];
      if (route && !cards.has(route.endpoint)) cards.set(route.endpoint, backendModels(route));
      const card = route ? (await cards.get(route.endpoint))?.get(route.model) : undefined;
      return { object: 'model', created: 0, owned_by: 'rein', ...card, id: m.id, policy_version: m.policyVersion };
    }),
  );
  return { object: 'list', data };
}

function pathClaimOf(params: { rolloutId: string; attempt: string }): RolloutKeyClaim {
  const attempt = Number(params.attempt);
  if (!Number.isInteger(attempt) || attempt < 1) {
    throw new GatewayHttpError(400, 'invalid_attempt', `attempt must be a positive integer, got "${params.attempt}"`);
  }
  return { rolloutId: params.rolloutId, attempt };
}

/** A request body: one JSON value, nested no deeper than the gateway (and its journal) can walk. */
function parseJsonBody(text: string): unknown {
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new GatewayHttpError(
      400,
      'json_too_deep',
      `the JSON body nests deeper than ${MAX_JSON_DEPTH} levels; send a flatter one`,
    );
  }
  try {
    // A key named __proto__ stays a plain key here (JSON.parse makes it an own property), as it does for the backend.
    return JSON.parse(text);
  } catch (err) {
    throw new GatewayHttpError(
      400,
      'malformed_json',
      `malformed JSON body (${(err as Error).message}); send one JSON object`,
    );
  }
}

/** A backend endpoint's model cards by id; none when it cannot say (the list then shows what the gateway knows). */
async function backendModels(route: Route): Promise<Map<string, ModelCard>> {
  try {
    const res = await fetch(`${route.endpoint.replace(/\/+$/, '')}/models`, {
      signal: AbortSignal.timeout(3000),
      headers: route.backend.apiKey ? { authorization: `Bearer ${route.backend.apiKey}` } : {},
    });
    const body = (await res.json()) as { data?: unknown };
    const cards = Array.isArray(body.data) ? body.data.filter(isModelCard) : [];
    return new Map(cards.map((c) => [c.id, c]));
  } catch {
    return new Map();
  }
}

function isModelCard(card: unknown): card is ModelCard {
  return card !== null && typeof card === 'object' && typeof (card as { id?: unknown }).id === 'string';
}
