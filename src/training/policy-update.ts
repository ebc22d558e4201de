import { existsSync } from 'node:fs';
import path from 'node:path';
import type { ReinConfig, TrainerSettings } from '../config/schema.js';
import type { GatewayControlClient } from '../gateway/control-client.js';
import { packageRoot, reinCommand } from '../package-root.js';
import type { TrainResult } from '../policy/local-trainer.js';
import type { PolicyRecord, PolicyRegistry } from '../registry/policy-registry.js';
import { ensureServed, type Serving } from '../registry/serving.js';
import { runCommand } from '../rollouts/process.js';
import { isTrainerRefusal, PolicyLineageError, PolicySetupError, PolicyUpdateError } from './errors.js';
import { kubernetesPolicyTrainer } from './kubernetes-trainer.js';
import { trainerLogFile } from './trainer-log.js';

/**
 * The policy update of one iteration: train the parent on the iteration's batch into a new
 * version, register it with its lineage (a candidate, not promoted), and load it into the
 * serving backend behind the gateway so held-out replay can sample from it.
 */
export interface PolicyUpdateJob {
  runId: string;
  iteration: number;
  parentVersion: string;
  newVersion: string;
  /** The batch artifact (a file path) and its content hash, from the batch stage. */
  batchPath: string;
  batchContentHash: string;
}

/** Where a policy update runs: the local trainer as a child process, or a Kubernetes Job. */
export interface PolicyTrainer {
  /** Trains `parent` on the batch into `outputDir`; a retry finds a finished result instead of training again. */
  train(input: TrainInput): Promise<TrainResult>;
  /**
   * True when it takes the batch and parent as artifact-store URIs and stores the output at
   * `outputUri` itself (a Kubernetes Job whose pod stages them): the worker then stages nothing.
   */
  readonly readsArtifactStore?: boolean;
}

export interface TrainInput {
  parentCheckpoint: string;
  batchPath: string;
  outputDir: string;
  /** With a trainer that reads the artifact store: the URI it stores the output folder at. */
  outputUri?: string | undefined;
  signal?: AbortSignal | undefined;
  /**
   * Asked when the signal aborts: true when the update is handed back (its worker is going away)
   * rather than cancelled. A trainer that outlives its worker (a Kubernetes Job) runs on then, for
   * the next try to follow.
   */
  handedBack?: (() => boolean) | undefined;
}


/** The configured trainer: a Kubernetes Job per update when trainer.kubernetes is set, else a local process of the configured engine. */
export function policyTrainer(settings: TrainerSettings, logDir: string, artifacts?: ReinConfig['artifacts']): PolicyTrainer {
  return settings.kubernetes ? kubernetesPolicyTrainer(settings.kubernetes, settings, logDir, artifacts ? { artifacts } : {}) : localPolicyTrainer(settings, logDir);
}

/** The Python environment `npm run setup` installs the PyTorch trainer's pinned packages into. */
export function defaultTrainerPython(): string {
  return path.join(packageRoot(), '.tools', 'trainer', 'bin', 'python');
}

/** The rate the update trains at: a LoRA adapter's own when the PyTorch engine trains one and it is set. */
export function effectiveLearningRate(settings: Pick<TrainerSettings, 'engine' | 'learningRate' | 'pytorch'>): number {
  return settings.engine === 'pytorch' ? (settings.pytorch.lora?.learningRate ?? settings.learningRate) : settings.learningRate;
}

/** The command line of one update with the configured engine: `rein policy train` (tfjs) or `python -m rein_trainer train`. */
export function trainerCommand(settings: TrainerSettings, job: { parentCheckpoint: string; batchPath: string; outputDir: string }): { command: string; args: string[]; env: Record<string, string> } {
  const learningRate = effectiveLearningRate(settings);
  const common = [
    ...['--checkpoint', job.parentCheckpoint, '--batch', job.batchPath, '--out', job.outputDir],
    ...['--seed', String(settings.seed), '--lr', String(learningRate), '--epochs', String(settings.epochs)],
    ...['--minibatch', String(settings.minibatchSize), '--clip', String(settings.clipEpsilon), '--max-grad-norm', String(settings.maxGradNorm)],
  ];
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
  if (settings.engine === 'tfjs') {
    const rein = reinCommand();
    return { command: rein.command, args: [...rein.args, 'policy', 'train', ...common], env };
  }
  const { python, lora, device, dtype, maxTokensPerMicroBatch } = settings.pytorch;
  const command = python ?? process.env.REIN_TRAINER_PYTHON ?? defaultTrainerPython();
  if (!existsSync(command)) {
    throw new PolicySetupError(`the PyTorch trainer's Python ${command} does not exist: run \`npm run setup\` (it installs the trainer's pinned environment) or set trainer.pytorch.python`);
  }
  const trainerPackage = path.join(packageRoot(), 'trainer');
  return {
    command,
    args: [
      ...['-m', 'rein_trainer', 'train', ...common],
      ...['--device', device, '--dtype', dtype, '--max-tokens-per-micro-batch', String(maxTokensPerMicroBatch)],
      ...(lora ? ['--lora-rank', String(lora.rank), '--lora-alpha', String(lora.alpha), '--lora-dropout', String(lora.dropout), '--lora-target-modules', lora.targetModules.join(',')] : []),
    ],
    env: { ...env, PYTHONPATH: [trainerPackage, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter), PYTHONUNBUFFERED: '1' },
  };
}

/**
 * A trainer as a local child process (its own process group, killed on cancel). Exit 2 (bad
 * input: another batch format, architecture or tokenizer) and 3 (out of memory) are refusals a
 * retry cannot change: the update fails without retries, with the trainer's own message.
 */
export function localPolicyTrainer(settings: TrainerSettings, logDir: string): PolicyTrainer {
  return {
    async train({ parentCheckpoint, batchPath, outputDir, signal }) {
      const { command, args, env } = trainerCommand(settings, { parentCheckpoint, batchPath, outputDir });
      const run = await runCommand({
        command,
        args,
        env,
        timeoutMs: 24 * 3600_000,
        logFile: trainerLogFile(logDir, outputDir),
        signal,
      });
      if (run.cancelled) throw new PolicyUpdateError('the policy update was cancelled');
      const said = run.stderrTail.trim().split('\n').filter((line) => /^(rein|rein-trainer): /.test(line)).at(-1) ?? run.stderrTail.trim().slice(-500);
      if (isTrainerRefusal(run.exitCode)) throw new PolicySetupError(`the ${settings.engine} trainer refused the update: ${said}`);
      if (run.exitCode !== 0) throw new PolicyUpdateError(`the ${settings.engine} trainer ${run.spawnError ?? `exited with ${run.exitCode ?? run.killedBy}`}: ${said}`);
      // The trainer prints its result (which says whether it reused an earlier one) as its last line.
      return JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '') as TrainResult;
    },
  };
}

export interface PolicyUpdateDeps {
  registry: PolicyRegistry;
  trainer: PolicyTrainer;
  gateway: GatewayControlClient;
  /** The gateway backend new versions are served from, and its endpoints (OpenAI-compatible servers with vLLM's adapter API). */
  serving: Serving;
  policiesDir: string;
  signal?: AbortSignal;
  handedBack?: () => boolean;
}

export async function updatePolicy(job: PolicyUpdateJob, deps: PolicyUpdateDeps): Promise<{ policy: PolicyRecord; train: TrainResult }> {
  const parent = await deps.registry.get(job.parentVersion);
  if (!parent) throw new PolicyLineageError(`policy ${job.parentVersion} is not in the registry; register the base policy before training from it`);
  const outputDir = path.join(deps.policiesDir, job.runId, job.newVersion);
  const train = await deps.trainer.train({ parentCheckpoint: parent.checkpointUri, batchPath: job.batchPath, outputDir, signal: deps.signal, handedBack: deps.handedBack });
  if (train.batchContentHash !== job.batchContentHash) {
    throw new PolicyLineageError(`the trainer read batch ${train.batchContentHash}, the iteration built ${job.batchContentHash}: the batch file changed`);
  }
  const policy = await deps.registry.register({
    version: job.newVersion,
    parent: job.parentVersion,
    runId: job.runId,
    iteration: job.iteration,
    checkpointUri: train.checkpointUri ?? outputDir,
    batchContentHash: job.batchContentHash,
    format: train.format ?? 'full',
    baseCheckpointUri: train.format === 'lora' ? (train.base ?? null) : null,
    trainerMetrics: { steps: train.steps, skippedMinibatches: train.skippedMinibatches, seconds: train.seconds, ...train.metrics, ...(train.importanceWeights && { importanceWeights: train.importanceWeights }) },
  });
  await ensureServed(policy, deps.gateway, deps.serving);
  return { policy, train };
}
