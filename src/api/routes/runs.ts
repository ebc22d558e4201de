import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { iterationWorkflows } from '../../client/iterations.js';
import {
  cancelRun,
  describeRun,
  listRuns,
  newRunId,
  promotionGuard,
  resumeRun,
  signalRun,
  startRun,
  trainingRunInput,
  type RunListing,
  type RunReport,
} from '../../client/runs.js';
import { ArtifactNotFoundError, type ArtifactStore } from '../../artifacts/artifact-store.js';
import type { BatchReport } from '../../samples/batch.js';
import { batchReportName } from '../../artifacts/iteration-artifacts.js';
import { runConfigHash } from '../../client/run-config.js';
import { workflowUrl } from '../../cli/context.js';
import { runBatches, runRollouts, type RunBatch } from '../../console/run-rollouts.js';
import { runView, type RunView } from '../../console/run-view.js';
import { rolloutTokens, type RolloutTokens } from '../../console/token-view.js';
import { updateLog, type UpdateLog } from '../../console/update-log.js';
import type { PolicyRegistry, StoredDecision } from '../../registry/policy-registry.js';
import { readRunConfigText } from '../../config/run-config.js';
import { redact, redactionRules } from '../../gateway/redact.js';
import * as cs from '../console-schemas.js';
import { ApiError } from '../errors.js';
import { runOverrides, type ApiContext } from '../context.js';
import { declaring } from '../declared.js';
import * as s from '../schemas.js';

type RunPlugin = FastifyPluginAsyncZod<{ context: ApiContext }>;

/** A run's stored config, as the console shows it. */
export interface RunConfigView {
  runId: string;
  configHash: string;
  config: Record<string, unknown>;
}

/** Training runs: list, start, inspect, pause, stop and resume them, and the run page's joined iterations. */
export const runRoutes: RunPlugin = async (app, { context }) => {
  await app.register(runCollectionRoutes, { context });
  await app.register(runInspectionRoutes, { context });
  await app.register(runIterationRoutes, { context });
  await app.register(runControlRoutes, { context });
};

/** `/api/runs`: the runs there are, and starting one. */
const runCollectionRoutes: RunPlugin = async (app, { context }) => {
  const { client, config, taskQueue } = context;
  app.get(
    '/api/runs',
    {
      schema: {
        summary: 'Training runs, newest first',
        querystring: s.listRunsQuery,
        response: {
          200: z.object({
            items: z.array(declaring<RunListing>()(s.runListing)),
            total: z.number().int().describe('Runs matching the filters, all pages together'),
          }),
        },
      },
    },
    async (req) => listRuns(client, req.query),
  );
  app.post(
    '/api/runs',
    {
      schema: {
        summary: "Start a training run from the server's config (sizes may be overridden)",
        body: s.startRunBody,
        response: { 201: s.startedRun },
      },
    },
    async (req, reply) => {
      const started = await startRun(
        client,
        taskQueue,
        { ...trainingRunInput(config, runOverrides(req.body)), runId: req.body.runId ?? newRunId() },
        config,
        promotionGuard(config),
      );
      return reply.code(201).send(started);
    },
  );
};

/** One run as it stands: its report, and its iterations joined for the console. */
const runInspectionRoutes: RunPlugin = async (app, { context }) => {
  const { client } = context;
  app.get(
    '/api/runs/:runId',
    {
      schema: {
        summary: "A run's state, stage, iterations, held-out comparison and current activity",
        params: s.runIdParams,
        response: { 200: declaring<RunReport>()(s.runReport) },
      },
    },
    async (req) => describeRun(client, req.params.runId),
  );
  app.get(
    '/api/runs/:runId/iterations',
    {
      schema: {
        summary:
          "A run's iterations joined with their workflows, trainer metrics, ledger rows and gate decisions: what the console plots",
        params: s.runIdParams,
        response: { 200: declaring<RunView>()(cs.runView) },
      },
    },
    async (req) => joinedIterations(context, req.params.runId),
  );
  app.get(
    '/api/runs/:runId/config',
    {
      schema: {
        summary:
          "The config a run was started with (its result-shaping part, stored under its hash), redacted: what the console's config view and run comparison show",
        params: s.runIdParams,
        response: { 200: declaring<RunConfigView>()(cs.runConfigView) },
      },
    },
    async (req) => runConfigView(context, req.params.runId),
  );
  app.get(
    '/api/runs/:runId/rollouts',
    {
      schema: {
        summary:
          "A run's rollouts, training and held-out, newest iteration first: filtered by iteration, kind, task, status, failure class, merge cause, policy version and reward, a page at a time",
        params: s.runIdParams,
        querystring: cs.runRolloutsQuery,
        response: { 200: declaring<Awaited<ReturnType<typeof runRollouts>>>()(cs.runRolloutsPage) },
      },
    },
    async (req) =>
      runRollouts(context.gateway(), await batchesOf(context, req.params.runId), req.query, (iteration) =>
        mismatchRollouts(context.artifacts(), req.params.runId, iteration),
      ),
  );
};

/** One iteration's batch token by token, and its trainer log (live while its update runs). */
const runIterationRoutes: RunPlugin = async (app, { context }) => {
  app.get(
    '/api/runs/:runId/iterations/:iteration/tokens',
    {
      schema: {
        summary:
          "A training rollout's sequences in an iteration's batch, token by token: trained or not, weight, advantage, behaviour and trainer log-probs",
        params: cs.iterationParams,
        querystring: cs.iterationTokensQuery,
        response: { 200: declaring<RolloutTokens>()(cs.rolloutTokens) },
      },
    },
    async (req) => {
      const { runId, iteration } = req.params;
      const trained = await context.registry(async (r) =>
        (await r.list({ runId })).find((p) => p.iteration === iteration),
      );
      return rolloutTokens(
        { runId, iteration, rolloutId: req.query.rollout },
        { artifacts: context.artifacts(), trained },
      );
    },
  );
  app.get(
    '/api/runs/:runId/iterations/:iteration/log',
    {
      schema: {
        summary: "An iteration's trainer log as uploaded so far (redacted): live while its policy update runs",
        params: cs.iterationParams,
        response: { 200: declaring<UpdateLog>()(cs.updateLog) },
      },
    },
    async (req) => updateLog(context.artifacts(), req.params.runId, req.params.iteration),
  );
};

/**
 * The config a run was started with, as stored under its hash (the part that shapes results: harness, verifier,
 * environment, rollouts, samples, gate, base, what the journal records), redacted by the API's rules and the
 * run's own, so a secret in a harness's environment never leaves.
 */
async function runConfigView(context: ApiContext, runId: string): Promise<RunConfigView> {
  const hash = await runConfigHash(context.client, runId);
  if (hash === undefined)
    throw new ApiError(404, 'config_unknown', `run ${runId} names no config hash: it was started by an older Rein`);
  const { text } = await readRunConfigText(context.artifacts(), hash);
  const config = JSON.parse(text) as Record<string, unknown>;
  const own = (config.gateway as { redact?: { rules?: Array<{ name: string; regex: string }> } } | undefined)?.redact;
  const rules = redactionRules([...context.config.gateway.redact.rules, ...(own?.rules ?? [])], true);
  return { runId, configHash: hash, config: redact(config, rules) };
}

/** The run's batches: its iterations' training rollouts and the held-out replays its gates' decisions name. */
async function batchesOf(context: ApiContext, runId: string): Promise<RunBatch[]> {
  const report = await describeRun(context.client, runId);
  const iterations = report.status?.iterations ?? [];
  const decisions = await context.registry((r) => gateDecisions(r, iterations));
  return runBatches(runId, iterations, report.status?.nextIteration ?? 1, (id) => decisions.get(id));
}

/** What an iteration's batch report says of its rollouts' merges; nothing before the batch stage wrote it. */
async function mismatchRollouts(artifacts: ArtifactStore, runId: string, iteration: number) {
  try {
    const text = await artifacts.get(artifacts.uriOf(batchReportName(runId, iteration)));
    return (JSON.parse(text.toString('utf8')) as Partial<BatchReport>).mismatchRolloutIds ?? {};
  } catch (err) {
    if (err instanceof ArtifactNotFoundError) return {};
    throw err;
  }
}

/** The decisions the iterations' gates cite, by id (one the registry no longer has is left out). */
async function gateDecisions(
  registry: PolicyRegistry,
  iterations: ReadonlyArray<{ gate?: { decisionId: string } }>,
): Promise<Map<string, StoredDecision>> {
  const ids = [...new Set(iterations.flatMap((i) => (i.gate ? [i.gate.decisionId] : [])))];
  const found = await Promise.all(ids.map((id) => registry.decision(id)));
  return new Map(found.flatMap((d) => (d ? [[d.id, d] as const] : [])));
}

/** Pausing, stopping and resuming a run (resume continues one that ended, too). */
const runControlRoutes: RunPlugin = async (app, { context }) => {
  const { client, config } = context;
  for (const signal of ['pause', 'stop'] as const) {
    const summary = { pause: 'Pause a run between iterations', stop: 'Stop a run after its current iteration' }[signal];
    app.post(
      `/api/runs/:runId/${signal}`,
      { schema: { summary, params: s.runIdParams, response: { 202: s.accepted } } },
      async (req, reply) => {
        await signalRun(client, req.params.runId, signal);
        return reply.code(202).send({ ok: true });
      },
    );
  }
  app.post(
    '/api/runs/:runId/cancel',
    {
      schema: {
        summary:
          "Cancel a running run now: its current iteration's activity is cancelled and the run ends CANCELLED (answers once Temporal has the request; the run's status shows when it ended)",
        params: s.runIdParams,
        response: { 202: s.accepted },
      },
    },
    async (req, reply) => {
      await cancelRun(client, req.params.runId, context.taskQueue, { wait: false });
      return reply.code(202).send({ ok: true });
    },
  );
  app.post(
    '/api/runs/:runId/resume',
    {
      schema: {
        summary:
          'Resume a paused run, or continue one that failed, was terminated, cancelled or timed out from its first unfinished iteration (a new execution under the same run id)',
        params: s.runIdParams,
        response: { 202: s.resumedRun },
      },
    },
    async (req, reply) => {
      const resumed = await resumeRun(client, req.params.runId, {
        allowConcurrentPromotion: config.gate.concurrentRuns === 'allow',
      });
      if (resumed.action === 'signalled') return reply.code(202).send(resumed);
      const { fromIteration, policyVersion, previousStatus, reason, executionRunId } = resumed.continuation;
      return reply
        .code(202)
        .send({ action: resumed.action, fromIteration, policyVersion, previousStatus, reason, executionRunId });
    },
  );
};

/**
 * The run page's view: the run's report joined in memory with its workflows, policies, ledger rows and the decisions
 * its gates cite.
 */
async function joinedIterations(context: ApiContext, runId: string): Promise<RunView> {
  const { client, config, temporalUiUrl } = context;
  const report = await describeRun(client, runId);
  const through = Math.max(
    report.status?.nextIteration ?? 1,
    ...(report.status?.iterations.map((i) => i.iteration) ?? []),
  );
  const [workflows, executionRunId] = await Promise.all([
    iterationWorkflows(client, runId, through, { completed: context.completedIterations }),
    client.workflow
      .getHandle(runId)
      .describe()
      .then((d) => d.runId),
  ]);
  const ledger = await (await context.ledger()).list({ runId });
  const { policies, decisions } = await context.registry(async (r) => ({
    policies: await r.list({ runId }),
    decisions: await gateDecisions(r, report.status?.iterations ?? []),
  }));
  return runView({
    report,
    executionRunId,
    workflows,
    policies,
    ledger,
    decision: (id) => decisions.get(id),
    workflowUrl: (id, run) => (temporalUiUrl ? workflowUrl(temporalUiUrl, config.temporal.namespace, id, run) : null),
  });
}
