import { z } from 'zod';
import { ADVANTAGE_ESTIMATORS } from '../samples/advantages.js';
import { harnessSchema, verifierSchema } from '../rollouts/harness-spec.js';
import { LOSS_AGGREGATIONS } from '../samples/loss-weights.js';
import { kubernetesTrainerSchema } from '../training/kubernetes-trainer-settings.js';
import { gateRulesSchema } from '../gate/gate.js';
import { DEFAULT_MIN_FREE_MEGABYTES } from '../preflight/disk-space.js';
import { redactionRegexProblem } from '../gateway/redact.js';
import { routingNameProblem } from '../gateway/routing.js';
import { notificationsSchema } from '../notify/events.js';
import { tracingSettings } from '../telemetry/settings.js';
import { storeSettings } from '../store/config.js';
import { logSettings } from '../log/config.js';
import { retentionSchema } from './retention.js';

const port = z.number().int().min(1).max(65535);

/** A regular expression, compiled at check time so `rein config check` finds a broken one, not the first call. */
const regexSource = z
  .string()
  .min(1)
  .superRefine((source, ctx) => {
    try {
      new RegExp(source);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `a valid regular expression (${(err as Error).message})` });
    }
  });

/** Redaction rules run on RE2 (linear time), whose syntax differs from JavaScript's: checked as RE2 reads them. */
const redactionRegex = z
  .string()
  .min(1)
  .superRefine((source, ctx) => {
    const problem = redactionRegexProblem(source);
    if (problem) ctx.addIssue({ code: 'custom', message: `a valid regular expression (Invalid regular expression: ${problem})` });
  });

/** A backend, policy version or alias name: the gateway's one rule, so a config cannot hold a name its admin API refuses. */
const routingName = z.string().superRefine((name, ctx) => {
  const problem = routingNameProblem(name);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

const tlsFiles = z.strictObject({
  clientCertPath: z.string().optional().describe('PEM client certificate for mTLS (relative to the config file)'),
  clientKeyPath: z.string().optional().describe('PEM private key of the client certificate'),
  serverCaCertPath: z.string().optional().describe('PEM CA bundle that signs the server certificate'),
  serverName: z.string().optional().describe('Override of the server name checked against the certificate'),
});

const devServer = z.strictObject({
  ip: z.string().default('localhost').describe('Address the embedded dev server and its Web UI bind to'),
  port: port.default(7233).describe('gRPC port of the embedded dev server'),
  uiPort: port.default(8233).describe('Port of the Temporal Web UI'),
  headless: z.boolean().default(false).describe('Run without the Web UI'),
  dbFile: z
    .string()
    .default('temporal/dev.sqlite')
    .describe('SQLite file of the dev server, relative to dataDir; workflow history survives restarts'),
  logLevel: z.enum(['debug', 'info', 'warn', 'error']).default('warn').describe('Log level of the dev server'),
});

const temporal = z.strictObject({
  address: z
    .string()
    .min(1)
    .optional()
    .describe('host:port of an existing Temporal server or cluster; when set, Rein starts no dev server (env TEMPORAL_ADDRESS)'),
  namespace: z.string().min(1).default('default').describe('Temporal namespace (env TEMPORAL_NAMESPACE)'),
  taskQueue: z.string().min(1).default('rein').describe('Task queue the Rein workers poll'),
  apiKey: z.string().min(1).optional().describe('API key, e.g. for Temporal Cloud (env TEMPORAL_API_KEY)'),
  tls: z
    .union([z.boolean(), tlsFiles])
    .optional()
    .describe('true for server-authenticated TLS, or certificate files for mTLS (env TEMPORAL_TLS*)'),
  devServer: devServer.prefault({}).describe('The embedded dev server Rein starts when no address is set'),
});

const backend = z.strictObject({
  endpoints: z
    .array(z.url({ protocol: /^https?$/ }))
    .min(1)
    .describe('Base URLs of the OpenAI-compatible server(s), ending in /v1; a rollout sticks to one'),
  apiKeyEnv: z
    .string()
    .optional()
    .describe('Name of the environment variable holding the backend API key (keys stay out of config files)'),
  tokenIds: z.boolean().default(true).describe('Ask for token ids (vLLM >= 0.10.2 return_token_ids)'),
  logprobs: z.boolean().default(true).describe("Ask for the sampled tokens' log-probs"),
});

const gateway = z
  .strictObject({
    host: z.string().default('127.0.0.1').describe('Address the gateway listens on'),
    port: port.default(8400).describe('Port of the gateway (OpenAI-compatible proxy and rollout API)'),
    publicUrl: z.url().optional().describe('How harnesses reach the gateway, if not http://host:port'),
    adminKeyHash: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional()
      .describe('SHA-256 (hex) of the admin key; else REIN_GATEWAY_ADMIN_KEY, else a key generated into dataDir/gateway/admin-key'),
    secretFile: z
      .string()
      .default('gateway/secret')
      .describe('Secret rollout keys are derived from, relative to dataDir; created on first start'),
    traceDb: z.string().default('traces.sqlite').describe('SQLite trace store, relative to dataDir'),
    bodyLimitBytes: z.number().int().min(1024).default(32 * 1024 * 1024).describe('Largest request body accepted'),
    requestTimeoutMs: z.number().int().min(100).default(30_000).describe('Longest a request may take to arrive whole (a slower one gets 408); the answer may take as long as the backend needs'),
    headersTimeoutMs: z.number().int().min(100).default(600_000).describe('Longest wait for a backend to start answering'),
    bodyTimeoutMs: z.number().int().min(100).default(120_000).describe('Longest silence inside a backend response'),
    retryAfterSeconds: z.number().int().min(1).default(5).describe('Retry-After sent while a policy is paused'),
    maxShadowsInFlight: z
      .number()
      .int()
      .min(1)
      .default(256)
      .describe('Mirror mode: shadow calls in flight at most; past it they are not sent and are journaled as shadow_overloaded'),
    redact: z
      .strictObject({
        defaults: z.boolean().default(true).describe('Redact API keys, bearer tokens, rollout keys, private keys'),
        rules: z
          .array(z.strictObject({ name: z.string().min(1).describe('Shown in what replaces a match: [REDACTED:<name>]'), regex: redactionRegex.describe('RE2 syntax (flags inline, as (?i); no backreferences or lookaround)') }))
          .default([])
          .describe('Extra patterns to redact before anything is journaled'),
      })
      .prefault({})
      .describe('What is redacted from every text before it is journaled (and before traces export it)'),
    tracing: tracingSettings.prefault({}),
    backends: z.record(routingName, backend).default({}).describe('Inference servers by name'),
    policies: z
      .record(routingName, z.strictObject({ backend: z.string().describe('A backend of gateway.backends'), model: z.string().min(1).describe('The model name that backend serves it under') }))
      .default({})
      .describe('Policy version -> the backend and model name serving it'),
    aliases: z.record(routingName, z.string()).default({}).describe('Model alias a harness asks for -> policy version'),
  })
  .superRefine((g, ctx) => {
    for (const [version, policy] of Object.entries(g.policies)) {
      if (!Object.hasOwn(g.backends, policy.backend)) {
        ctx.addIssue({
          code: 'custom',
          path: ['policies', version, 'backend'],
          message: `a backend defined in gateway.backends (known: ${Object.keys(g.backends).join(', ') || 'none'})`,
        });
      }
    }
    for (const [alias, version] of Object.entries(g.aliases)) {
      if (!Object.hasOwn(g.policies, version)) {
        ctx.addIssue({
          code: 'custom',
          path: ['aliases', alias],
          message: `a policy version defined in gateway.policies (known: ${Object.keys(g.policies).join(', ') || 'none'})`,
        });
      }
    }
  });

const samples = z.strictObject({
  estimator: z.enum(ADVANTAGE_ESTIMATORS).default('grpo').describe('Group-relative advantage estimator'),
  zeroVarianceGroups: z.enum(['drop', 'keep']).default('drop').describe('Groups whose rewards are all equal'),
  lossAggregation: z.enum(LOSS_AGGREGATIONS).default('token-mean').describe('Loss normalization, folded into per-token weights'),
  normConstant: z.number().positive().optional().describe('C of seq-mean-token-sum-norm (default: maxResponseTokens)'),
  maxPromptTokens: z.number().int().positive().default(16_384).describe('Longer first prompts drop the sequence'),
  maxResponseTokens: z.number().int().positive().default(8_192).describe('Sequences are cut this far after their first prompt'),
  truncated: z
    .enum(['mask', 'drop', 'zero_reward'])
    .default('mask')
    .describe('A truncated or unfinished rollout gets no outcome reward: masked, dropped, or trained with reward 0'),
  excludedFailureClasses: z
    .array(z.string())
    .default(['infrastructure', 'orchestrator', 'verifier', 'cancelled', 'unfinished'])
    .describe('Rollouts failed for these reasons are not the policy\'s doing and are left out (counted)'),
  incompleteGroups: z.enum(['keep', 'drop']).default('keep').describe('When some rollouts of a group are left out'),
  maxVersionsBehind: z.number().int().min(0).optional().describe('Leave out rollouts sampled from older policies'),
  importanceWeightCap: z
    .number()
    .positive()
    .optional()
    .describe('Truncated importance weights: the trainer caps pi_trainer / pi_sampler at this value (written into the batch)'),
  tokenizerDir: z
    .string()
    .optional()
    .describe("The model's tokenizer.json + tokenizer_config.json, to re-render calls without token ids and measure drift"),
  thresholds: z
    .strictObject({
      maxDriftRate: z.number().min(0).max(1).default(0.05).describe('Fail the stage above this share of drifted prompts'),
      minRolloutsUsed: z.number().int().min(0).default(1).describe('Fail the stage with fewer usable rollouts'),
      minScoredShare: z
        .number()
        .min(0)
        .max(1)
        .default(0.8)
        .describe("Fail the stage when a smaller share of the iteration's rollouts was scored (the rest lost to faults: infrastructure, orchestrator, verifier, environment, cancelled): an update from the scraps of a broken iteration is not worth its risk"),
      maxRewardDisagreementRate: z
        .number()
        .min(0)
        .max(1)
        .default(1)
        .describe('Fail above this share of rollouts whose harness-reported reward disagrees with the verifier'),
    })
    .prefault({})
    .describe('Data-quality checks: the batch stage fails (not retried) when one is missed, its report kept'),
});

const rollouts = z.strictObject({
  concurrency: z.number().int().min(1).max(10_000).default(16).describe('Harness runs at once (local processes or running Jobs)'),
  launchesPerSecond: z.number().positive().max(10_000).optional().describe('The most harness runs started per second (Job creations on Kubernetes); no limit when unset'),
  maxAttempts: z.number().int().min(1).max(10).default(2).describe('Attempts per rollout; only infrastructure failures start another'),
  dependencyWaitSeconds: z
    .number()
    .int()
    .min(0)
    .max(86_400)
    .default(300)
    .describe("Before launching, wait (with backoff, shown in the stage's status) while the gateway or the pinned version's backend does not answer; at most this long per set of rollouts, then launches go ahead and fail as infrastructure"),
  hiddenFields: z.array(z.string().min(1)).default(['answer']).describe('Task fields the harness must not see (the verifier gets the whole task)'),
  rewardWeights: z
    .record(z.string().min(1), z.number().finite())
    .default({ success: 1 })
    .describe("reward = sum of weight x the verifier's component; every component is stored"),
  refusalPatterns: z
    .array(regexSource)
    .optional()
    .describe("Regular expressions (case-insensitive) that mark a model reply as a refusal, for the 'model' failure class; a few common English refusals when unset"),
});

const pytorchTrainer = z.strictObject({
  python: z
    .string()
    .min(1)
    .optional()
    .describe('The Python that runs `-m rein_trainer` (default: $REIN_TRAINER_PYTHON, else the environment `npm run setup` installs in .tools/trainer)'),
  lora: z
    .strictObject({
      rank: z.number().int().min(1).max(1024).default(16).describe('LoRA rank r'),
      alpha: z.number().positive().default(32).describe('LoRA alpha (the update is scaled by alpha / r)'),
      dropout: z.number().min(0).max(1).default(0).describe('LoRA dropout'),
      targetModules: z.array(z.string().min(1)).min(1).default(['q_proj', 'k_proj', 'v_proj', 'o_proj']).describe('Linear layers that get adapters'),
      learningRate: z.number().positive().max(1).optional().describe('Adam learning rate for the adapter (LoRA usually wants a higher one than full fine-tuning); default trainer.learningRate'),
    })
    .optional()
    .describe('Train a LoRA adapter on the base (what vLLM hot-loads); without it, full fine-tuning'),
  device: z.enum(['auto', 'cpu', 'cuda']).default('auto').describe('auto: CUDA when a GPU is present, else CPU'),
  dtype: z.enum(['auto', 'float32', 'bfloat16']).default('auto').describe('auto: bfloat16 on CUDA, float32 on CPU'),
  maxTokensPerMicroBatch: z.number().int().positive().default(16384).describe('Packed tokens per forward pass (gradients accumulate across them); lower it on CUDA out of memory'),
});

const trainer = z.strictObject({
  engine: z
    .enum(['tfjs', 'pytorch'])
    .default('tfjs')
    .describe('tfjs: the embedded CPU trainer (`rein policy train`); pytorch: the PyTorch trainer (`python -m rein_trainer train`) for real models and GPUs'),
  learningRate: z.number().positive().max(1).default(3e-4).describe('Adam learning rate'),
  epochs: z.number().int().min(1).max(100).default(4).describe('Passes over each batch'),
  minibatchSize: z.number().int().min(1).default(32).describe('Sequences per optimizer step'),
  clipEpsilon: z.number().positive().max(1).default(0.2).describe('PPO clip range'),
  maxGradNorm: z.number().positive().default(1).describe('Gradient norm limit'),
  seed: z.number().int().default(1).describe('Seed for minibatch order (the same batch and seed train the same policy)'),
  pytorch: pytorchTrainer.prefault({}).describe('Settings of the PyTorch trainer (engine: pytorch)'),
  servingBackend: routingName.default('embedded').describe('The gateway backend (gateway.backends) new policy versions are loaded into'),
  kubernetes: kubernetesTrainerSchema.optional().describe('Run each policy update (either engine) as a Kubernetes Job from a template instead of a local process'),
});

const policyServer = z.strictObject({
  enabled: z
    .boolean()
    .optional()
    .describe('Serve the embedded CPU policy; default: when gateway.backends is empty (the embedded default)'),
  host: z.string().default('127.0.0.1').describe('Address the embedded policy server listens on'),
  port: port.default(8401).describe('Port of the embedded policy server (OpenAI-compatible, vLLM-style token ids)'),
});

const api = z.strictObject({
  host: z.string().default('127.0.0.1').describe('Address the HTTP API listens on'),
  port: port.default(8402).describe('Port of the HTTP API (runs, schedules, policies; OpenAPI at /openapi.json)'),
});

const worker = z.strictObject({
  metricsHost: z.string().default('127.0.0.1').describe('Address the worker\'s /metrics server binds to (0.0.0.0 for a Prometheus elsewhere)'),
  metricsPort: port
    .optional()
    .describe('Port of the worker\'s Prometheus /metrics (stage durations, rollouts by outcome, trainer metrics); unset: no metrics server'),
});

const storage = z.strictObject({
  minFreeMegabytes: z
    .number()
    .int()
    .min(0)
    .default(DEFAULT_MIN_FREE_MEGABYTES)
    .describe('Below this much free space (MiB) in dataDir, preflight fails and every activity refuses to start (a retryable DiskSpaceError that says so); 0: no check'),
});

const artifacts = z.strictObject({
  url: z
    .string()
    .regex(/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/, 'write s3://bucket/optional/prefix (a bucket name is 3-63 lowercase letters, digits, dots, hyphens)')
    .optional()
    .describe('s3://bucket/prefix: batches, reports, checkpoints and adapters live in that bucket of S3-compatible storage, so services on other hosts read the same URIs (credentials: the standard AWS environment or config); unset: the folder dataDir/artifacts (env REIN_ARTIFACTS_URL)'),
  s3: z
    .strictObject({
      endpoint: z.url().optional().describe("An S3-compatible server's URL (MinIO, Ceph, …); unset: AWS S3 (env REIN_S3_ENDPOINT)"),
      region: z.string().min(1).optional().describe('Region of the bucket; unset: AWS_REGION, else us-east-1 (env REIN_S3_REGION)'),
      forcePathStyle: z.boolean().optional().describe('Address the bucket in the path (most S3-compatible servers want this); default: true with an endpoint, false for AWS (env REIN_S3_FORCE_PATH_STYLE)'),
    })
    .prefault({})
    .describe('Settings of the S3 client (with an s3:// url)'),
});

const run = z.strictObject({
  base: z
    .strictObject({
      version: routingName.default('v0').describe('Name of the policy version the run starts from'),
      checkpoint: z
        .string()
        .optional()
        .describe("Its checkpoint folder (relative to the config file); default: the embedded base policy shipped with Rein"),
    })
    .prefault({})
    .describe('The policy a run starts from'),
  startFrom: z
    .enum(['production', 'base'])
    .default('production')
    .describe('Train from the version production serves when the run starts (the base until something is promoted), or always from the base'),
  trainTasks: z.string().optional().describe('JSONL task set the run trains on (relative to the config file)'),
  heldoutTasks: z.string().optional().describe('JSONL task set replayed with the base and each candidate (relative to the config file)'),
  heldoutLimit: z.number().int().min(1).optional().describe('Replay only the first N held-out tasks'),
  heldoutEvery: z.number().int().min(1).default(1).describe('Replay held-out tasks after every n-th iteration and after the last'),
  heartbeatTimeoutSeconds: z
    .number()
    .int()
    .min(1)
    .max(3600)
    .default(60)
    .describe('How long a worker may go silent in a stage before the stage moves to another worker'),
  iterations: z.number().int().min(1).nullable().default(3).describe('Iterations; null: until stopped'),
  tasksPerIteration: z.number().int().min(1).default(32).describe('Training tasks per iteration (taken in order, wrapping around)'),
  samplesPerTask: z.number().int().min(1).default(8).describe('Rollouts per task (a GRPO group)'),
  evalHarnessEnv: z
    .record(z.string(), z.string())
    .default({})
    .describe("Variables that put the harness in its evaluation settings for held-out replay (e.g. greedy decoding)"),
  onFailedIteration: z.enum(['stop', 'skip', 'retry']).default('stop').describe('What a run does when an iteration fails'),
  maxIterationTries: z.number().int().min(1).max(20).default(3).describe('With onFailedIteration retry: tries per iteration'),
});

const gate = gateRulesSchema.extend({
  autoPromote: z.boolean().default(true).describe("A training run moves the production alias to a candidate the gate passes; false: promote by hand (`rein promote`)"),
  concurrentRuns: z
    .enum(['refuse', 'allow'])
    .default('refuse')
    .describe("refuse: a run that promotes is not started (nor continued) while another run promotes into the same store's production; allow: both run (each promotion still moves the alias only from where its gate measured it)"),
});

export const reinConfigSchema = z
  .strictObject({
    $schema: z.string().optional().describe('JSON Schema reference, for editors; ignored by Rein'),
    dataDir: z
      .string()
      .min(1)
      .default('.rein')
      .describe("Rein's data directory (traces, artifacts, dev server state), relative to the config file"),
    storage: storage.prefault({}).describe('The free space Rein needs in dataDir'),
    artifacts: artifacts.prefault({}).describe('Where batches, reports, checkpoints and adapters live: dataDir/artifacts, or an S3 bucket'),
    store: storeSettings.prefault({}).describe("Where Rein's stores live: SQLite files in dataDir, or one PostgreSQL database"),
    log: logSettings
      .prefault({})
      .describe('Logs: lines to read on a terminal, JSON lines (pino) on stderr otherwise'),
    temporal: temporal.prefault({}).describe('The Temporal server: an existing one, or the embedded dev server'),
    gateway: gateway.prefault({}).describe('The gateway harnesses call: backends, policy versions and aliases, the journal, redaction, tracing'),
    samples: samples.prefault({}).describe('Turning journaled rollouts into a training batch: merging, exclusions, advantages, loss weights, data-quality checks'),
    harness: harnessSchema.optional().describe("The agent harness Rein runs on tasks (your program, unchanged)"),
    verifier: verifierSchema.optional().describe('The program that scores a harness run: prints {"components": {...}}'),
    rollouts: rollouts.prefault({}).describe('Running the harness on tasks: concurrency, attempts, hidden fields, reward weights'),
    trainer: trainer.prefault({}).describe('The policy update: which trainer, where, with what settings'),
    policyServer: policyServer.prefault({}).describe('The embedded CPU policy server'),
    run: run.prefault({}).describe('What `rein train` trains: task sets, sizes, the base policy'),
    api: api.prefault({}).describe("Rein's HTTP API; its key is the gateway's admin key"),
    worker: worker.prefault({}).describe('The Rein worker (`rein worker`, and the one `rein dev` runs)'),
    notifications: notificationsSchema.prefault({}).describe('Where Rein tells people about promotions, refusals, rollbacks and failed runs'),
    gate: gate.prefault({}).describe('When a candidate may replace production: held-out replay of both, paired, and the rules it must pass'),
    retention: retentionSchema.prefault({}).describe('How long journaled rollouts, rollout folders and staged copies are kept (`rein gc`); unset: for ever'),
  })
  .describe('Rein configuration');

export type ReinConfig = z.output<typeof reinConfigSchema>;
export type TemporalSettings = ReinConfig['temporal'];
export type DevServerSettings = TemporalSettings['devServer'];
export type GatewaySettings = ReinConfig['gateway'];
export type SampleSettings = ReinConfig['samples'];
export type RolloutSettings = ReinConfig['rollouts'];
export type TrainerSettings = ReinConfig['trainer'];
export type RunSettings = ReinConfig['run'];
export type PolicyServerSettings = ReinConfig['policyServer'];
export type GateSettings = ReinConfig['gate'];

/**
 * Every setting at its default, as the schema defines it (no file, no environment, paths not yet
 * resolved): what help texts show when no config can be read.
 */
export function configDefaults(): ReinConfig {
  return reinConfigSchema.parse({});
}

/** The JSON Schema of the config file, as `rein config schema` prints it. */
export function configJsonSchema(): object {
  return z.toJSONSchema(reinConfigSchema, { io: 'input' });
}
