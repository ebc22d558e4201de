import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { releaseInput, startRelease } from '../../client/release.js';
import { decisionIdFor } from '../../gate/release-ids.js';
import { gatewayControlFromConfig } from '../../gateway/from-config.js';
import type { AliasChange, PolicyRecord } from '../../registry/policy-registry.js';
import { PRODUCTION_ALIAS, promote, rollback, type AliasMove } from '../../registry/promotion.js';
import type { ApiContext } from '../context.js';
import { declaring } from '../declared.js';
import * as s from '../schemas.js';

type PolicyPlugin = FastifyPluginAsyncZod<{ context: ApiContext }>;

/**
 * Policies and releases: the registry's versions and aliases, promotion, rollback, and release candidates through the
 * gate.
 */
export const policyRoutes: PolicyPlugin = async (app, { context }) => {
  await app.register(registryRoutes, { context });
  await app.register(productionMoveRoutes, { context });
  await app.register(releaseRoutes, { context });
};

/** What the registry holds: its versions with their lineage, and its aliases with their history. */
const registryRoutes: PolicyPlugin = async (app, { context }) => {
  const { registry } = context;
  app.get(
    '/api/policies',
    {
      schema: {
        summary: 'Policy versions with their lineage',
        querystring: s.listPoliciesQuery,
        response: { 200: z.object({ items: z.array(declaring<PolicyRecord>()(s.policyRecord)) }) },
      },
    },
    async (req) => ({
      items: await registry((r) => r.list(req.query.runId === undefined ? {} : { runId: req.query.runId })),
    }),
  );
  app.get(
    '/api/aliases',
    {
      schema: {
        summary: 'Where each alias points, and every move (promotions, rollbacks, overrides)',
        response: { 200: declaring<{ aliases: Record<string, string>; history: AliasChange[] }>()(s.aliases) },
      },
    },
    async () => registry(async (r) => ({ aliases: await r.aliases(), history: await r.aliasHistory() })),
  );
};

/** Moving production by hand: promotion (behind a passing gate decision or an override) and rollback. */
const productionMoveRoutes: PolicyPlugin = async (app, { context }) => {
  const { config, registry, told } = context;
  const aliasMove = declaring<AliasMove>()(s.aliasMove);
  app.post(
    '/api/policies/:version/promote',
    {
      schema: {
        summary:
          'Move production to a version: needs a passing gate decision against the current production, or an override (recorded)',
        params: s.versionParams,
        body: s.promoteBody,
        response: { 200: aliasMove },
      },
    },
    async (req) => {
      const { body } = req;
      const request = {
        version: req.params.version,
        actor: 'api',
        ...(body?.decisionId && { decisionId: body.decisionId }),
        ...(body?.override && { override: body.override }),
      };
      return told(await registry((r) => promote(r, gatewayControlFromConfig(config.gateway), request)));
    },
  );
  app.post(
    '/api/production/rollback',
    {
      schema: {
        summary: 'Move production back to the version it served before the current one',
        body: s.rollbackBody,
        response: { 200: aliasMove },
      },
    },
    async (req) =>
      told(
        await registry((r) =>
          rollback(r, gatewayControlFromConfig(config.gateway), {
            actor: 'api',
            ...(req.body?.reason && { reason: req.body.reason }),
          }),
        ),
      ),
  );
};

/** Release candidates: a held-out replay against production, through the gate. */
const releaseRoutes: PolicyPlugin = async (app, { context }) => {
  const { client, config, registry } = context;
  app.post(
    '/api/releases',
    {
      schema: {
        summary:
          'Replay held-out tasks with a candidate and with production, apply the gate, promote on a pass when asked',
        body: s.releaseBody,
        response: { 202: s.startedRelease },
      },
    },
    async (req, reply) => {
      const { candidate, promote: promoteOnPass, heldoutLimit } = req.body;
      const input = releaseInput(config, candidate, { promote: promoteOnPass, heldoutLimit, actor: 'api' });
      const incumbent = (await registry((r) => r.alias(PRODUCTION_ALIAS))) ?? config.run.base.version;
      const workflowId = await startRelease(client, context.taskQueue, input, config);
      return reply.code(202).send({
        workflowId,
        decisionId: decisionIdFor(
          candidate,
          incumbent,
          input.configHash,
          input.heldout.taskIds.length,
          input.samplesPerTask,
          input.harnessVersion,
        ),
      });
    },
  );
};
