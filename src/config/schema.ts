import { z } from 'zod';
import { artifactsSettings } from '../artifacts/config.js';
import { gateSettings } from '../gate/config.js';
import { gatewaySettings, routingName } from '../gateway/config.js';
import { logSettings } from '../log/config.js';
import { notificationsSchema } from '../notify/events.js';
import { policyServerSettings } from '../policy/config.js';
import { port } from '../port-setting.js';
import { storageSettings } from '../preflight/config.js';
import { retentionSchema } from '../retention/config.js';
import { rolloutSettings } from '../rollouts/config.js';
import { environmentSchema } from '../environments/settings.js';
import { harnessSchema, verifierSchema } from '../rollouts/harness-spec.js';
import { sampleSettings } from '../samples/config.js';
import { storeSettings } from '../store/config.js';
import { kubernetesTrainerSchema } from '../training/kubernetes-trainer-settings.js';
import { temporalSettings } from './temporal.js';

/*
 * The config file's schema, composed of the sections the subsystems own (each in its folder's
 * config.ts, depending on zod and small shared pieces only, so that this module imports no
 * subsystem's machinery and none of them imports it back). What stays here belongs to no one
 * domain folder: the API's and the worker's (interfaces, which the domain must not import) and the
 * run's (what workflows/ runs). The trainer's section is to move to src/training/, where its
 * settings are being reworked.
 */

const pytorchTrainer = z.strictObject({
  python: z
    .string()
    .min(1)
    .optional()
    .describe(
      'The Python that runs `-m rein_trainer` (default: $REIN_TRAINER_PYTHON, else the environment `npm run setup` installs in .tools/trainer)',
    ),
  lora: z
    .strictObject({
      rank: z.number().int().min(1).max(1024).default(16).describe('LoRA rank r'),
      alpha: z.number().positive().default(32).describe('LoRA alpha (the update is scaled by alpha / r)'),
      dropout: z.number().min(0).max(1).default(0).describe('LoRA dropout'),
      targetModules: z
        .array(z.string().min(1))
        .min(1)
        .default(['q_proj', 'k_proj', 'v_proj', 'o_proj'])
        .describe('Linear layers that get adapters'),
      learningRate: z
        .number()
        .positive()
        .max(1)
        .optional()
        .describe(
          'Adam learning rate for the adapter (LoRA usually wants a higher one than full fine-tuning); default trainer.learningRate',
        ),
    })
    .optional()
    .describe('Train a LoRA adapter on the base (what vLLM hot-loads); without it, full fine-tuning'),
  device: z.enum(['auto', 'cpu', 'cuda']).default('auto').describe('auto: CUDA when a GPU is present, else CPU'),
  dtype: z.enum(['auto', 'float32', 'bfloat16']).default('auto').describe('auto: bfloat16 on CUDA, float32 on CPU'),
  maxTokensPerMicroBatch: z
    .number()
    .int()
    .positive()
    .default(16384)
    .describe('Packed tokens per forward pass (gradients accumulate across them); lower it on CUDA out of memory'),
});

const trainer = z.strictObject({
  engine: z
    .enum(['tfjs', 'pytorch'])
    .default('tfjs')
    .describe(
      'tfjs: the embedded CPU trainer (`rein policy train`); pytorch: the PyTorch trainer (`python -m rein_trainer train`) for real models and GPUs',
    ),
  learningRate: z.number().positive().max(1).default(3e-4).describe('Adam learning rate'),
  epochs: z.number().int().min(1).max(100).default(4).describe('Passes over each batch'),
  minibatchSize: z.number().int().min(1).default(32).describe('Sequences per optimizer step'),
  clipEpsilon: z.number().positive().max(1).default(0.2).describe('PPO clip range'),
  maxGradNorm: z.number().positive().default(1).describe('Gradient norm limit'),
  seed: z
    .number()
    .int()
    .default(1)
    .describe('Seed for minibatch order (the same batch and seed train the same policy)'),
  pytorch: pytorchTrainer.prefault({}).describe('Settings of the PyTorch trainer (engine: pytorch)'),
  servingBackend: routingName
    .default('embedded')
    .describe('The gateway backend (gateway.backends) new policy versions are loaded into'),
  kubernetes: kubernetesTrainerSchema
    .optional()
    .describe('Run each policy update (either engine) as a Kubernetes Job from a template instead of a local process'),
});

const api = z.strictObject({
  host: z.string().default('127.0.0.1').describe('Address the HTTP API listens on'),
  port: port.default(8402).describe('Port of the HTTP API (runs, schedules, policies; OpenAPI at /openapi.json)'),
});

const worker = z.strictObject({
  maxConcurrentActivities: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe(
      "Activities this worker runs at once (unset: Temporal's default, 100). A rollout shard is one long activity: with several workers sharing sets, about rollouts.shard.inFlight / workers plus 2 (for batch and update) spreads the shards, instead of the first worker to poll taking them all",
    ),
  metricsHost: z
    .string()
    .default('127.0.0.1')
    .describe("Address the worker's /metrics server binds to (0.0.0.0 for a Prometheus elsewhere)"),
  metricsPort: port
    .optional()
    .describe(
      "Port of the worker's Prometheus /metrics (stage durations, rollouts by outcome, trainer metrics); unset: no metrics server",
    ),
});

const run = z.strictObject({
  base: z
    .strictObject({
      version: routingName.default('v0').describe('Name of the policy version the run starts from'),
      checkpoint: z
        .string()
        .optional()
        .describe(
          'Its checkpoint folder (relative to the config file); default: the embedded base policy shipped with Rein',
        ),
    })
    .prefault({})
    .describe('The policy a run starts from'),
  startFrom: z
    .enum(['production', 'base'])
    .default('production')
    .describe(
      'Train from the version production serves when the run starts (the base until something is promoted), or always from the base',
    ),
  trainTasks: z.string().optional().describe('JSONL task set the run trains on (relative to the config file)'),
  heldoutTasks: z
    .string()
    .optional()
    .describe('JSONL task set replayed with the base and each candidate (relative to the config file)'),
  heldoutLimit: z.number().int().min(1).optional().describe('Replay only the first N held-out tasks'),
  heldoutEvery: z
    .number()
    .int()
    .min(1)
    .default(1)
    .describe('Replay held-out tasks after every n-th iteration and after the last'),
  heartbeatTimeoutSeconds: z
    .number()
    .int()
    .min(1)
    .max(3600)
    .default(60)
    .describe('How long a worker may go silent in a stage before the stage moves to another worker'),
  iterations: z.number().int().min(1).nullable().default(3).describe('Iterations; null: until stopped'),
  tasksPerIteration: z
    .number()
    .int()
    .min(1)
    .default(32)
    .describe('Training tasks per iteration (taken in order, wrapping around)'),
  samplesPerTask: z.number().int().min(1).default(8).describe('Rollouts per task (a GRPO group)'),
  evalHarnessEnv: z
    .record(z.string(), z.string())
    .default({})
    .describe('Variables that put the harness in its evaluation settings for held-out replay (e.g. greedy decoding)'),
  schedule: z
    .enum(['sync', 'async'])
    .default('sync')
    .describe(
      "sync: each iteration's rollouts, then its update and held-out replay. async: the next iteration's rollouts run, from the newest version the run trained, beside this one's update and replay; needs samples.maxVersionsBehind >= 1 and an importance correction (samples.importanceWeightCap or samples.importanceSampling)",
    ),
  onFailedIteration: z
    .enum(['stop', 'skip', 'retry'])
    .default('stop')
    .describe('What a run does when an iteration fails'),
  maxIterationTries: z
    .number()
    .int()
    .min(1)
    .max(20)
    .default(3)
    .describe('With onFailedIteration retry: tries per iteration'),
});

export const reinConfigSchema = z
  .strictObject({
    $schema: z.string().optional().describe('JSON Schema reference, for editors; ignored by Rein'),
    dataDir: z
      .string()
      .min(1)
      .default('.rein')
      .describe("Rein's data directory (traces, artifacts, dev server state), relative to the config file"),
    storage: storageSettings.prefault({}).describe('The free space Rein needs in dataDir'),
    artifacts: artifactsSettings
      .prefault({})
      .describe('Where batches, reports, checkpoints and adapters live: dataDir/artifacts, or an S3 bucket'),
    store: storeSettings
      .prefault({})
      .describe("Where Rein's stores live: SQLite files in dataDir, or one PostgreSQL database"),
    log: logSettings.prefault({}).describe('Logs: lines to read on a terminal, JSON lines (pino) on stderr otherwise'),
    temporal: temporalSettings
      .prefault({})
      .describe('The Temporal server: an existing one, or the embedded dev server'),
    gateway: gatewaySettings
      .prefault({})
      .describe('The gateway harnesses call: backends, policy versions and aliases, the journal, redaction, tracing'),
    samples: sampleSettings
      .prefault({})
      .describe(
        'Turning journaled rollouts into a training batch: merging, exclusions, advantages, loss weights, data-quality checks',
      ),
    harness: harnessSchema.optional().describe('The agent harness Rein runs on tasks (your program, unchanged)'),
    verifier: verifierSchema.optional().describe('The program that scores a harness run: prints {"components": {...}}'),
    environment: environmentSchema.optional(),
    rollouts: rolloutSettings
      .prefault({})
      .describe('Running the harness on tasks: concurrency, attempts, hidden fields, reward weights'),
    trainer: trainer.prefault({}).describe('The policy update: which trainer, where, with what settings'),
    policyServer: policyServerSettings.prefault({}).describe('The embedded CPU policy server'),
    run: run.prefault({}).describe('What `rein train` trains: task sets, sizes, the base policy'),
    api: api.prefault({}).describe("Rein's HTTP API; its key is the gateway's admin key"),
    worker: worker.prefault({}).describe('The Rein worker (`rein worker`, and the one `rein dev` runs)'),
    notifications: notificationsSchema
      .prefault({})
      .describe('Where Rein tells people about promotions, refusals, rollbacks and failed runs'),
    gate: gateSettings
      .prefault({})
      .describe('When a candidate may replace production: held-out replay of both, paired, and the rules it must pass'),
    retention: retentionSchema
      .prefault({})
      .describe('How long journaled rollouts, rollout folders and staged copies are kept (`rein gc`); unset: for ever'),
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
