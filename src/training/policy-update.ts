import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { TrainerSettings } from '../config/schema.js';
import type { GatewayControlClient } from '../gateway/control-client.js';
import { reinCommand } from '../package-root.js';
import type { TrainResult } from '../policy/local-trainer.js';
import type { PolicyRecord, PolicyRegistry } from '../registry/policy-registry.js';
import { runCommand } from '../rollouts/process.js';
import { PolicyLineageError, PolicyUpdateError } from './errors.js';
import { kubernetesPolicyTrainer } from './kubernetes-trainer.js';

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
  train(input: { parentCheckpoint: string; batchPath: string; outputDir: string; signal?: AbortSignal | undefined }): Promise<TrainResult>;
}


/** The configured trainer: a Kubernetes Job per update when trainer.kubernetes is set, else the local trainer. */
export function policyTrainer(settings: TrainerSettings, logDir: string): PolicyTrainer {
  return settings.kubernetes ? kubernetesPolicyTrainer(settings.kubernetes, settings, logDir) : localPolicyTrainer(settings, logDir);
}

/** The embedded default's trainer: `rein policy train` as a child process (its own process group, killed on cancel). */
export function localPolicyTrainer(settings: TrainerSettings, logDir: string): PolicyTrainer {
  return {
    async train({ parentCheckpoint, batchPath, outputDir, signal }) {
      mkdirSync(logDir, { recursive: true });
      const rein = reinCommand();
      const run = await runCommand({
        command: rein.command,
        args: [
          ...rein.args,
          'policy',
          'train',
          ...['--checkpoint', parentCheckpoint, '--batch', batchPath, '--out', outputDir],
          ...['--seed', String(settings.seed), '--lr', String(settings.learningRate), '--epochs', String(settings.epochs)],
          ...['--minibatch', String(settings.minibatchSize), '--clip', String(settings.clipEpsilon), '--max-grad-norm', String(settings.maxGradNorm)],
        ],
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
        timeoutMs: 24 * 3600_000,
        logFile: path.join(logDir, `${path.basename(outputDir)}.train.log`),
        signal,
      });
      if (run.cancelled) throw new PolicyUpdateError('the policy update was cancelled');
      if (run.exitCode !== 0) throw new PolicyUpdateError(`the trainer ${run.spawnError ?? `exited with ${run.exitCode ?? run.killedBy}`}: ${run.stderrTail.trim().slice(-500)}`);
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
  serving: { backend: string; endpoints: string[] };
  policiesDir: string;
  signal?: AbortSignal;
}

export async function updatePolicy(job: PolicyUpdateJob, deps: PolicyUpdateDeps): Promise<{ policy: PolicyRecord; train: TrainResult }> {
  const parent = deps.registry.get(job.parentVersion);
  if (!parent) throw new PolicyLineageError(`policy ${job.parentVersion} is not in the registry; register the base policy before training from it`);
  const outputDir = path.join(deps.policiesDir, job.runId, job.newVersion);
  const train = await deps.trainer.train({ parentCheckpoint: parent.checkpointUri, batchPath: job.batchPath, outputDir, ...(deps.signal && { signal: deps.signal }) });
  if (train.batchContentHash !== job.batchContentHash) {
    throw new PolicyLineageError(`the trainer read batch ${train.batchContentHash}, the iteration built ${job.batchContentHash}: the batch file changed`);
  }
  const policy = deps.registry.register({
    version: job.newVersion,
    parent: job.parentVersion,
    runId: job.runId,
    iteration: job.iteration,
    checkpointUri: outputDir,
    batchContentHash: job.batchContentHash,
    trainerMetrics: { steps: train.steps, skippedMinibatches: train.skippedMinibatches, seconds: train.seconds, ...train.metrics, ...(train.importanceWeights && { importanceWeights: train.importanceWeights }) },
  });
  await serve(policy, deps);
  return { policy, train };
}

/** Loads the version on every serving endpoint that lacks it (a retry finds it there), then routes it in the gateway. */
async function serve(policy: PolicyRecord, deps: PolicyUpdateDeps): Promise<void> {
  for (const endpoint of deps.serving.endpoints) {
    const base = endpoint.replace(/\/+$/, '').replace(/\/v1$/, '');
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data?: Array<{ id: string }> };
    if (models.data?.some((m) => m.id === policy.version)) continue;
    const res = await fetch(`${base}/v1/load_lora_adapter`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ lora_name: policy.version, lora_path: policy.checkpointUri }),
    });
    if (!res.ok) throw new PolicyUpdateError(`loading ${policy.version} into ${base} failed (${res.status}): ${(await res.text()).slice(0, 300)}`);
  }
  await deps.gateway.registerPolicy(policy.version, { backend: deps.serving.backend, model: policy.version });
}
