import { z } from 'zod';
import { VERDICTS } from '../gate/gate.js';
import { OVERLAP_POLICIES } from '../client/schedules.js';
import { RUN_EXECUTIONS, RUN_ID_PATTERN, RUN_ID_RULE } from '../client/runs.js';
import { iterationVariants } from './variant-schemas.js';

/** The HTTP API's request and response shapes: validation at the edge, and the OpenAPI document. */

const positive = z.number().int().min(1);

export const runSizes = z.strictObject({
  iterations: positive.nullable().optional().describe('Iterations; null: until stopped (default: the config)'),
  tasksPerIteration: positive.optional(),
  samplesPerTask: positive.optional(),
  heldoutLimit: positive.optional(),
});

export const startRunBody = runSizes.extend({
  runId: z.string().regex(RUN_ID_PATTERN, RUN_ID_RULE).optional().describe('Default: run-<time>-<random>'),
});

export const runIdParams = z.strictObject({ runId: z.string().min(1) });
export const listRunsQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(20),
  offset: z.coerce.number().int().min(0).default(0).describe('Runs to skip (newest first): the page starts after them'),
  execution: z.enum(RUN_EXECUTIONS).optional().describe('Only runs in this Temporal execution status'),
  search: z.string().min(1).max(200).optional().describe('Only runs whose id holds this text (any case)'),
});
export const listPoliciesQuery = z.strictObject({ runId: z.string().min(1).optional() });

export const createScheduleBody = runSizes.extend({
  scheduleId: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'letters, digits, dot, dash, underscore'),
  every: z.string().optional().describe('An interval: 1d, 6h, 30m, 1h30m'),
  cron: z.string().optional().describe('A cron expression (UTC)'),
  overlap: z.enum(OVERLAP_POLICIES).default('skip'),
  paused: z.boolean().optional(),
  note: z.string().optional(),
});
export const scheduleIdParams = z.strictObject({ scheduleId: z.string().min(1) });
export const scheduleChangeBody = z.strictObject({ note: z.string().optional() }).optional();

/** A time the API's sources keep as text (ISO 8601). */
export const timestamp = z.string().describe('ISO 8601');
/** A time Temporal gives as a Date: answered as ISO 8601 text. */
const instant = z.date().describe('ISO 8601');
export const counts = z.record(z.string(), z.number());
const gateSummary = z.object({
  verdict: z.enum(VERDICTS),
  decisionId: z.string(),
  incumbent: z.string(),
  promoted: z.boolean(),
  reasons: z.array(z.string()),
});
/** The gate's verdict on an iteration's candidate, as the run reports it. */
export const iterationGate = gateSummary.extend({
  acceptedRate: z
    .object({ incumbent: z.number(), candidate: z.number() })
    .optional()
    .describe("Held-out accepted rates over the gate's scored pairs"),
});
const iteration = z.object({
  iteration: z.number().int(),
  candidate: z.string().nullable(),
  meanReward: z.number().nullable(),
  heldoutMeanReward: z.number().nullable(),
  gate: iterationGate
    .optional()
    .describe("The gate's verdict on the candidate against production, and whether production moved to it"),
  failures: z
    .record(z.string(), counts)
    .optional()
    .describe(
      'Failed rollouts by failure class per stage (rollouts, heldout, heldout-production); absent when none failed',
    ),
  failureReasons: z
    .record(z.string(), z.record(z.string(), z.string()))
    .optional()
    .describe("Per stage, one failed rollout's reason for each failure class in failures (cut short)"),
  failed: z.string().optional(),
  samples: z
    .object({
      sampledFrom: z.string().describe('The policy version the training rollouts sampled from'),
      keptByVersionsBehind: counts
        .optional()
        .describe(
          'Rollouts trained on, by how many versions behind the trained policy they sampled ("unknown": off its lineage)',
        ),
      importance: z
        .object({ maskedFraction: z.number(), cappedFraction: z.number(), ratioMean: z.number(), ratioMax: z.number() })
        .optional()
        .describe(
          "The trainer's importance correction over trained tokens: shares masked and capped, the ratio's mean and max",
        ),
    })
    .optional()
    .describe('Where the trained samples came from, their staleness and their correction'),
  variants: iterationVariants
    .optional()
    .describe(
      "The environment variants training used, those checked, and the rigger's findings; absent without an environment",
    ),
});
const heldoutResult = z.object({
  policyVersion: z.string(),
  meanReward: z.number().nullable(),
  meanRewardByTask: counts,
  byFailureClass: counts.optional().describe('Failed rollouts of the replay by failure class; absent when none failed'),
});

/** A finished rollout set, as workflows report it. */
const rolloutSetSummary = z.object({
  batchId: z.string(),
  harnessVersion: z.string(),
  total: z.number().int(),
  byStatus: counts,
  byFailureClass: counts,
  failureReasons: z
    .record(z.string(), z.string())
    .optional()
    .describe("One failed rollout's reason per failure class (the first met, cut short); absent when none failed"),
  meanReward: z.number().nullable().describe('Over the scored rollouts; null when none was scored'),
  unscored: z.number().int().describe('Rollouts lost to a fault before the verifier scored them'),
  rewardDisagreements: z.number().int(),
  meanRewardByTask: counts,
});

export const runStatus = z.object({
  runId: z.string(),
  state: z
    .enum(['running', 'paused', 'stopping', 'finished', 'stopped', 'cancelled', 'failed', 'terminated', 'timed_out'])
    .describe("The run's own state; for a run that ended without finishing, how it ended (Temporal's status)"),
  stage: z.string(),
  currentWorkflowId: z
    .string()
    .optional()
    .describe("The workflow doing the current stage's work (this run, or its current iteration)"),
  nextIteration: z.number().int(),
  policyVersion: z.string(),
  iterations: z.array(iteration),
  heldout: z
    .object({ base: heldoutResult, latest: heldoutResult.nullable(), production: heldoutResult.optional() })
    .optional()
    .describe(
      "The starting policy's held-out replay, the latest candidate's, and what production serves after the latest gate (absent until a gate ran)",
    ),
  rolloutsAhead: z
    .object({ iteration: z.number().int(), policyVersion: z.string(), workflowId: z.string() })
    .optional()
    .describe(
      "Schedule async: the next iteration's training rollouts, running from policyVersion beside the current iteration's update and replay",
    ),
  sampled: z
    .object({ iteration: z.number().int(), policyVersion: z.string(), rollouts: rolloutSetSummary })
    .optional()
    .describe('Schedule async: rollouts already run for the next iteration, and the version they sampled from'),
});

export const runListing = z.object({
  runId: z.string(),
  execution: z.string().describe("Temporal's execution status: RUNNING, COMPLETED, FAILED, ..."),
  startTime: instant,
  closeTime: instant.optional(),
  stage: z.string().optional(),
  policyVersion: z.string().optional(),
});

export const runReport = z.object({
  runId: z.string(),
  execution: z.string(),
  startTime: instant,
  closeTime: instant.optional(),
  status: runStatus.optional(),
  problem: z.string().optional().describe('Why the run failed, or why its status could not be read'),
  activity: z
    .object({
      workflowId: z.string(),
      stage: z.string().optional(),
      type: z.string(),
      attempt: z.number().int(),
      done: z.number().int().optional(),
      total: z.number().int().optional(),
      lastFailure: z.string().optional(),
      waiting: z.string().optional(),
    })
    .optional(),
  resumes: z
    .array(
      z.object({
        fromIteration: z.number().int(),
        policyVersion: z.string(),
        startOver: z.boolean(),
        previousExecutionRunId: z.string(),
        previousStatus: z.string(),
        reason: z.string(),
        progressFrom: z
          .enum(['query', 'history'])
          .describe(
            "Where the progress came from: query, the run's own record of it (what its status query answers, kept in its memo); history, rebuilt from the execution's history (continuations made by earlier Rein versions)",
          ),
        at: timestamp,
      }),
    )
    .describe('Each time the run was continued after its execution ended (`rein resume`), oldest first; the last ten'),
});

export const policyRecord = z.object({
  version: z.string(),
  parent: z.string().nullable(),
  runId: z.string().nullable(),
  iteration: z.number().int().nullable(),
  checkpointUri: z.string(),
  batchContentHash: z.string().nullable(),
  trainerMetrics: z.record(z.string(), z.unknown()),
  format: z
    .enum(['full', 'lora'])
    .optional()
    .describe('A full model folder, or a LoRA adapter served on baseCheckpointUri (default full)'),
  baseCheckpointUri: z
    .string()
    .nullable()
    .optional()
    .describe('The full base model an adapter applies to; null for full checkpoints'),
  status: z.enum(['candidate', 'promoted', 'rejected', 'retired']),
  createdAt: timestamp,
});

export const scheduleListing = z.object({
  scheduleId: z.string(),
  paused: z.boolean(),
  note: z.string().optional(),
  spec: z.string(),
  nextRuns: z.array(instant),
  recentRuns: z.array(z.object({ runId: z.string(), startedAt: instant })),
});

export const startedRun = z.object({ runId: z.string(), executionRunId: z.string() });
export const accepted = z.object({ ok: z.literal(true) });
export const resumedRun = z.object({
  action: z
    .enum(['signalled', 'continued'])
    .describe('signalled: a paused run was sent the resume signal; continued: a closed run goes on as a new execution'),
  fromIteration: z.number().int().optional(),
  policyVersion: z.string().optional(),
  previousStatus: z.string().optional().describe("Temporal's status of the execution that was continued"),
  reason: z.string().optional().describe('Why that execution ended'),
  executionRunId: z.string().optional(),
});
export const errorBody = z.object({ error: z.object({ code: z.string(), message: z.string() }) });

export const versionParams = z.strictObject({ version: z.string().min(1) });
export const decisionParams = z.strictObject({ decisionId: z.string().min(1) });
export const rolloutIdParams = z.strictObject({ rolloutId: z.string().min(1) });
export const promoteBody = z
  .strictObject({
    decisionId: z
      .string()
      .min(1)
      .optional()
      .describe('The gate decision that allows it (default: the newest against the current production)'),
    override: z
      .strictObject({ reason: z.string().min(1) })
      .optional()
      .describe('Promote without a passing decision; recorded as an override'),
  })
  .optional();
export const rollbackBody = z.strictObject({ reason: z.string().min(1).optional() }).optional();
export const releaseBody = z.strictObject({
  candidate: z.string().min(1),
  promote: z.boolean().default(false).describe('Move production to the candidate when the gate passes'),
  heldoutLimit: positive.optional(),
});
export const startedRelease = z.object({
  workflowId: z.string(),
  decisionId: z
    .string()
    .describe('Where the decision will be (GET /api/decisions/{decisionId}) once the replays are done'),
});

const aliasChange = z.object({
  id: z.number().int(),
  alias: z.string(),
  from: z.string().nullable(),
  to: z.string(),
  operation: z.enum(['set', 'promote', 'rollback']),
  actor: z.string(),
  reason: z.string().nullable(),
  override: z.boolean(),
  decisionId: z.string().nullable(),
  at: timestamp,
});
export const aliasMove = z.object({
  change: aliasChange,
  gatewayUpdated: z.boolean(),
  gatewayError: z.string().optional(),
});
export const aliases = z.object({ aliases: z.record(z.string(), z.string()), history: z.array(aliasChange) });
/** The gate's record as stored; the parts the console reads are named, the rest passes through as the gate wrote it. */
const decisionRecord = z
  .looseObject({
    reasons: z.array(z.string()).optional().describe('One sentence per failed check, with its numbers'),
    checks: z
      .array(
        z.looseObject({
          name: z.string(),
          passed: z.boolean(),
          detail: z.string(),
          rollouts: z.array(z.string()).describe('The rollout ids behind the numbers'),
        }),
      )
      .optional(),
    evidence: z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        'Accepted rates, gain with its interval and test, failure classes, tokens, steps, latency, reward disagreement',
      ),
    rules: z.record(z.string(), z.unknown()).optional().describe("The gate's rules the decision applied"),
    environment: z
      .object({
        module: z.string().describe("The environment's id (name@version:hash)"),
        trainedIn: z.array(z.string()).describe("Ids of the variants the run's training used up to this decision"),
        variants: z.array(
          z.object({
            id: z.string(),
            name: z.string(),
            origin: z.enum(['declared', 'rigger']),
            kept: z.boolean(),
            ledgerId: z.string().describe('Its row in the environment ledger (GET /api/ledger?runId=…)'),
          }),
        ),
      })
      .optional()
      .describe("The run's environment: every variant checked so far, kept or not, by its ledger row"),
  })
  .describe('Rules, checks with the rollout ids behind them, evidence');
export const decision = z.object({
  id: z.string(),
  candidate: z.string(),
  incumbent: z.string(),
  verdict: z.enum(VERDICTS),
  record: decisionRecord,
  createdAt: timestamp,
});
export const ledgerQuery = z.strictObject({ runId: z.string().min(1).optional() });
export const ledgerEntry = z.object({
  id: z.string(),
  kind: z
    .enum(['iteration', 'release', 'variant'])
    .describe("An iteration's training, a release's held-out replay, or a variant's check before training used it"),
  variant: z
    .object({
      name: z.string(),
      id: z.string(),
      origin: z.enum(['declared', 'rigger']),
      changes: z.string().describe('What it changes, in words'),
      why: z.string().describe('Declared in config, or the weakness the rigger aimed it at'),
      kept: z.boolean(),
      reason: z.string().describe('The verdict in words'),
      samples: z.number().int(),
      scored: z.number().int(),
      solved: z.number().int(),
      record: z.string().describe("The check's full record in the artifact store"),
    })
    .optional()
    .describe('On variant rows: the variant of the environment and its check with fresh rollouts'),
  runId: z.string().nullable(),
  iteration: z.number().int().nullable(),
  decisionId: z.string().nullable(),
  batchIds: z.array(z.string()),
  model: z.object({ policyVersion: z.string(), parent: z.string().nullable() }),
  harness: z.object({ version: z.string() }),
  environment: z.object({
    taskSet: z.string(),
    verifier: z.string(),
    config: z.string(),
    module: z.string().optional().describe("The environment module's id (name@version:hash), when the run has one"),
    variants: z
      .array(z.string())
      .optional()
      .describe('The ids of the environment variants some of its training rollouts ran in'),
  }),
  metrics: z.object({
    rollouts: z.number().int(),
    unscored: z.number().int().optional(),
    acceptedRate: z.number(),
    tokens: z.number(),
    elapsedSeconds: z.number(),
    toolErrors: z.number().int(),
    retries: z.number().int(),
    interventions: z.number().int(),
    irreversibleFailures: z.number().int(),
  }),
  at: timestamp,
});
