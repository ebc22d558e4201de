import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { decisionPairs, type DecisionPair } from '../../console/decision-pairs.js';
import { rolloutView, type RolloutView } from '../../console/rollout-view.js';
import type { LedgerEntry } from '../../ledger/ledger.js';
import type { StoredDecision } from '../../registry/policy-registry.js';
import * as cs from '../console-schemas.js';
import type { ApiContext } from '../context.js';
import { declaring } from '../declared.js';
import { ApiError } from '../errors.js';
import * as s from '../schemas.js';

/** The evidence behind results: gate decisions and their held-out pairs, rollouts as journaled, and the ledgers. */
export const evidenceRoutes: FastifyPluginAsyncZod<{ context: ApiContext }> = async (app, { context }) => {
  const decision = async (decisionId: string) => {
    const found = await context.registry((r) => r.decision(decisionId));
    if (!found) throw new ApiError(404, 'decision_not_found', `no gate decision ${decisionId}`);
    return found;
  };
  app.get(
    '/api/decisions/:decisionId',
    {
      schema: {
        summary: 'A gate decision: rules, checks, evidence and the rollouts behind each number',
        params: s.decisionParams,
        response: { 200: declaring<StoredDecision>()(s.decision) },
      },
    },
    async (req) => decision(req.params.decisionId),
  );
  app.get(
    '/api/decisions/:decisionId/pairs',
    {
      schema: {
        summary:
          "A gate decision's held-out pairs, task by task: each side's rollout, reward and whether the candidate gained or lost the task",
        params: s.decisionParams,
        response: { 200: z.object({ items: z.array(declaring<DecisionPair>()(cs.decisionPair)) }) },
      },
    },
    async (req) => ({ items: await decisionPairs(context.gateway(), await decision(req.params.decisionId)) }),
  );
  app.get(
    '/api/rollouts/:rolloutId',
    {
      schema: {
        summary:
          "A rollout as the gateway journaled it (calls redacted as stored, without token ids), its events, and the harness's and verifier's logs",
        params: s.rolloutIdParams,
        response: { 200: declaring<RolloutView>()(cs.rolloutView) },
      },
    },
    // Logs come from the artifact store the workers upload to (any host), else from this machine's dataDir.
    async (req) =>
      rolloutView(
        context.gateway(),
        { artifacts: context.artifacts(), dataDir: context.config.dataDir },
        req.params.rolloutId,
        context.config.gate.acceptReward,
        (version, side) => context.registry((r) => r.decisionsFor(version, side)),
      ),
  );
  app.get(
    '/api/ledger',
    {
      schema: {
        summary: 'The model, harness and environment ledgers: a row per iteration and release',
        querystring: s.ledgerQuery,
        response: { 200: z.object({ items: z.array(declaring<LedgerEntry>()(s.ledgerEntry)) }) },
      },
    },
    async (req) => ({
      items: await (await context.ledger()).list(req.query.runId === undefined ? {} : { runId: req.query.runId }),
    }),
  );
};
