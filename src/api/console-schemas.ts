import { z } from 'zod';
import { FAILURE_CLASSES, ROLLOUT_MODES, ROLLOUT_STATUSES } from '../rollouts/rollout.js';
import { MISMATCH_CAUSES } from '../samples/mismatch-causes.js';
import { counts, iterationGate, timestamp } from './schemas.js';
import { iterationVariants } from './variant-schemas.js';

/** The console's reads: a run's iterations joined, a decision's pairs, a rollout with its journal. */

const numberOrNull = z.number().nullable();

export const iterationView = z.object({
  iteration: z.number().int(),
  candidate: z.string().nullable(),
  execution: z.string().nullable().describe("Temporal's status of the iteration's workflow"),
  failed: z.string().nullable(),
  meanReward: numberOrNull.describe('Mean verifier reward of the training rollouts'),
  heldout: z
    .object({
      candidate: numberOrNull,
      production: numberOrNull,
      lower: numberOrNull,
      upper: numberOrNull,
      incumbent: z.string().nullable(),
      meanReward: numberOrNull,
    })
    .describe(
      "Accepted rates over the gate's scored pairs; lower/upper: production's rate plus the gate's interval on the gain",
    ),
  trainer: z.object({
    loss: numberOrNull,
    approxKl: numberOrNull,
    clipFraction: numberOrNull,
    entropy: numberOrNull,
    gradNorm: numberOrNull,
  }),
  trainerSteps: z
    .array(
      z.object({
        epoch: z.number().int(),
        loss: z.number(),
        approxKl: z.number(),
        clipFraction: z.number(),
        entropy: z.number(),
        gradNorm: z.number(),
        tokens: z.number(),
      }),
    )
    .describe("Each optimizer step's trainer metrics, in the order taken; empty where the trainer did not record them"),
  trainerLogprobs: z
    .object({ tokens: z.number().int(), meanAbsDiff: z.number(), maxAbsDiff: z.number() })
    .nullable()
    .describe(
      "|trainer − behaviour| log-prob over the batch's trained tokens: the parent's log-probs as the trainer computes them against those the gateway journaled",
    ),
  tokens: z.object({ rollouts: numberOrNull, trained: numberOrNull }),
  stageSeconds: counts.describe(
    'Seconds per stage (rollouts, batch, update, heldout, ledger) from the workflow history',
  ),
  samples: z
    .object({ sampledFrom: z.string().nullable(), keptByVersionsBehind: counts })
    .describe('The version the training rollouts sampled from, and the rollouts trained on by versions behind'),
  failures: z.object({ train: counts, heldout: counts }).describe('Rollouts by failure class'),
  failureReasons: z
    .object({ train: z.record(z.string(), z.string()), heldout: z.record(z.string(), z.string()) })
    .optional()
    .describe("One failed rollout's reason per failure class (cut short); absent when none was recorded"),
  gate: iterationGate.nullable(),
  workflows: z.array(
    z.object({
      label: z.string(),
      workflowId: z.string(),
      executionRunId: z.string(),
      url: z.string().nullable().describe('In the Temporal Web UI, when its address is known'),
    }),
  ),
  variants: iterationVariants.nullable().describe("The iteration's environment variants; null without an environment"),
});
export const runView = z.object({
  runId: z.string(),
  iterations: z.array(iterationView),
  workflowUrl: z.string().nullable(),
});

const pairSide = z.object({
  rolloutId: z.string(),
  status: z.string().nullable(),
  reward: numberOrNull,
  failureClass: z.string().nullable(),
});
export const decisionPair = z.object({
  taskId: z.string(),
  sample: z.number().int(),
  incumbent: pairSide,
  candidate: pairSide,
  outcome: z.enum(['gained', 'lost', 'both', 'neither', 'unscored']),
});

export const rollout = z
  .object({
    id: z.string(),
    taskId: z.string().nullable(),
    mode: z.enum(ROLLOUT_MODES),
    status: z.enum(ROLLOUT_STATUSES),
    statusReason: z.string().nullable(),
    attempts: z.number().int().describe('Attempts started so far; attempt numbers run 1..attempts'),
    keyless: z.boolean().describe('Calls on the path form need no key (an explicit, recorded choice)'),
    policyVersion: z.string().nullable().describe('Every call of the rollout goes to this version, when set'),
    failureClass: z.enum(FAILURE_CLASSES).nullable(),
    metadata: z.record(z.string(), z.unknown()),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .describe('The rollout: task, mode, status, failure class, policy version, attempts, metadata');

/** Absent while the call is in flight; the gateway fills them in when it ends. */
const callFinish = {
  response: z
    .unknown()
    .optional()
    .describe('The assembled response as the harness received it (redacted as stored), without token-id arrays'),
  usage: z.unknown().optional(),
  upstreamStatus: z.number().int().nullable().optional(),
  errorClass: z.string().nullable().optional(),
  errorMessage: z.string().nullable().optional(),
  ttftMs: z.number().nullable().optional().describe('Time to first token'),
  latencyMs: z.number().optional(),
};
export const callView = z.object({
  id: z.string(),
  rolloutId: z.string(),
  attempt: z.number().int(),
  seq: z.number().int(),
  endpoint: z.enum(['chat.completions', 'completions', 'responses', 'messages']),
  policyVersion: z.string(),
  backendUrl: z.string(),
  stream: z.boolean(),
  status: z.enum(['in_flight', 'ok', 'error']),
  requestReceived: z.unknown().describe('The request as the harness sent it (redacted as stored)'),
  requestSent: z.unknown().describe('The request as forwarded to the backend (redacted as stored)'),
  startedAt: z.number().describe('Milliseconds since the epoch'),
  ...callFinish,
  promptExtends: z.object({ ref: z.string(), prefixLength: z.number().int() }).nullable().optional(),
  promptTokens: z.number().int().nullable(),
  completionTokens: z.number().int().nullable(),
});

export const rolloutEvent = z.object({
  id: z.number().int(),
  rolloutId: z.string(),
  attempt: z.number().int(),
  type: z.enum(['reward', 'span', 'custom', 'intervention', 'status']),
  source: z
    .enum(['rollout', 'admin', 'gateway'])
    .describe("Who appended it: the rollout's own key, or the admin (control plane, verifier)"),
  actionId: z.string().nullable(),
  payload: z.record(z.string(), z.unknown()),
  at: timestamp,
});

export const rolloutView = z.object({
  rollout,
  calls: z
    .array(callView)
    .describe(
      'Each model call as journaled (request and response redacted as stored), with latency, time to first token and token counts',
    ),
  events: z.array(rolloutEvent).describe('Status changes (with failure evidence), tool spans, rewards, interventions'),
  rewards: z
    .object({ verified: numberOrNull, reported: numberOrNull, disagrees: z.boolean() })
    .describe("The verifier's reward and the one the harness reported"),
  outcome: z
    .object({
      accepted: z.boolean().nullable().describe("The verifier's reward reached acceptReward; null: not scored"),
      acceptReward: z.number().describe("The gate's acceptReward in this API's config"),
    })
    .describe('Whether the rollout solved its task, as the gate counts it'),
  trainedIn: z
    .object({ runId: z.string(), iteration: z.number().int() })
    .nullable()
    .describe('The run and iteration a training rollout belongs to (its batch <run>.it<n>); null for others'),
  decidedIn: z
    .array(z.object({ decisionId: z.string(), side: z.enum(['candidate', 'incumbent']), verdict: z.string() }))
    .describe("For a held-out replay's rollout: the gate decisions it is evidence in, and on which side"),
  logs: z
    .array(
      z.object({
        name: z.string(),
        text: z.string(),
        truncatedBytes: z.number().int(),
        source: z
          .enum(['artifacts', 'local', 'missing'])
          .describe(
            "artifacts: uploaded by the worker; local: only in the API host's dataDir; missing: neither (note says why and where it stayed)",
          ),
        note: z.string().optional(),
      }),
    )
    .describe("The end of the harness's and verifier's logs"),
  logsProblem: z
    .string()
    .nullable()
    .describe('Why the uploaded logs could not be read (the artifact store down or refusing)'),
});

/** The rollout browser's filters: `GET /api/runs/:runId/rollouts`. */
export const runRolloutsQuery = z.strictObject({
  iteration: z.coerce.number().int().min(1).optional(),
  kind: z.enum(['train', 'heldout']).optional().describe('Training rollouts, or the gates’ held-out replays'),
  taskId: z.string().min(1).optional(),
  status: z.enum(ROLLOUT_STATUSES).optional(),
  failureClass: z.enum(FAILURE_CLASSES).optional(),
  policyVersion: z.string().min(1).optional().describe('The version the rollout was pinned to (served by)'),
  minReward: z.coerce
    .number()
    .optional()
    .describe("The verifier's reward at least this (unscored rollouts never match)"),
  maxReward: z.coerce.number().optional(),
  mergeCause: z
    .enum(MISMATCH_CAUSES)
    .optional()
    .describe("Training rollouts with a call that did not extend its sequence for this cause (the batch report's)"),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  after: z.string().optional().describe('The previous page’s `next`'),
});

export const runRolloutRow = z.object({
  rolloutId: z.string(),
  iteration: z.number().int(),
  kind: z.enum(['train', 'heldout']),
  side: z
    .enum(['candidate', 'incumbent'])
    .nullable()
    .describe("A replay's side of its iteration's gate; null for training rollouts"),
  taskId: z.string().nullable(),
  sample: z.number().int().nullable(),
  status: z.enum(ROLLOUT_STATUSES),
  failureClass: z.enum(FAILURE_CLASSES).nullable(),
  reward: numberOrNull.describe("The verifier's reward of the current attempt; null: not scored"),
  policyVersion: z.string().nullable(),
  attempts: z.number().int(),
  updatedAt: timestamp,
});

export const runRolloutsPage = z.object({
  items: z.array(runRolloutRow),
  next: z.string().nullable().describe('Pass as `after` for the next page; null on the last'),
});

export const runConfigView = z.object({
  runId: z.string(),
  configHash: z.string().describe('The hash workflows, replays and decisions name it by'),
  config: z
    .record(z.string(), z.unknown())
    .describe('harness, verifier, environment, rollouts, samples, gate, base, evalHarnessEnv, gateway (redacted)'),
});

export const iterationParams = z.strictObject({
  runId: z.string().min(1),
  iteration: z.coerce.number().int().min(1),
});
export const iterationTokensQuery = z.strictObject({
  rollout: z.string().min(1).describe('The training rollout whose sequences to lay out'),
});

const tokenRow = z.object({
  id: z.number().int(),
  text: z.string().nullable().describe("The token decoded alone with the trained version's tokenizer"),
  trained: z.boolean().describe('In the loss (a completion the policy sampled), not prompt or inserted text'),
  weight: z.number().describe('The loss weight w_t the batch gives it (0 when untrained)'),
  advantage: z.number(),
  behaviourLogprob: numberOrNull.describe('The sampling policy’s log-prob as the gateway journaled it'),
  trainerLogprob: numberOrNull.describe('The parent’s log-prob as the trainer computed it before its update'),
  policyVersion: z.string().nullable().describe('The version that sampled it'),
});
export const rolloutTokens = z.object({
  runId: z.string(),
  iteration: z.number().int(),
  rolloutId: z.string(),
  batchUri: z.string(),
  trainedVersion: z.string().nullable(),
  trainerLogprobsMissing: z
    .string()
    .nullable()
    .describe("Why the trainer's log-probs are not shown; null when they are"),
  sequences: z.array(
    z.object({
      index: z.number().int().describe("The sequence's place in the batch"),
      tokensTotal: z.number().int(),
      trainedTokens: z.number().int(),
      tokens: z.array(tokenRow).describe('Its first 20,000 tokens at most'),
    }),
  ),
});

export const updateLog = z.object({
  runId: z.string(),
  iteration: z.number().int(),
  uri: z.string(),
  text: z.string().describe('Redacted as the journal is; uploaded every few seconds while the update runs'),
  cutBytes: z.number().int().describe("Bytes of the log's start left out (it keeps its last 4 MiB)"),
});
