import path from 'node:path';
import { updateLogName } from '../artifacts/iteration-artifacts.js';
import type { ReinConfig, TrainerSettings } from '../config/schema.js';
import type { GatewayControlClient } from '../gateway/control-client.js';
import type { TrainResult } from '../policy/local-trainer.js';
import type { PolicyRecord, PolicyRegistry } from '../registry/policy-registry.js';
import { ensureServed, type Serving } from '../registry/serving.js';
import { followLog, type LogUploadSettings } from '../rollouts/rollout-logs.js';
import { PolicyLineageError } from './errors.js';
import { localPolicyTrainer } from './local-policy-trainer.js';
import type { PolicyTrainer } from './policy-trainer.js';

// The trainers' own modules, for callers that import them from here.
export { localPolicyTrainer } from './local-policy-trainer.js';
export type { PolicyTrainer, TrainInput } from './policy-trainer.js';

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

/**
 * The configured trainer: a Kubernetes Job per update when trainer.kubernetes is set, else a local process of the
 * configured engine.
 */
export function policyTrainer(
  settings: TrainerSettings,
  logDir: string,
  artifacts?: ReinConfig['artifacts'],
): PolicyTrainer {
  const { kubernetes } = settings;
  if (!kubernetes) return localPolicyTrainer(settings, logDir);
  // The Kubernetes client is a large module tree: it loads with the first update that needs it.
  let trainer: Promise<PolicyTrainer> | undefined;
  const loaded = () =>
    (trainer ??= import('./kubernetes-trainer.js').then((m) =>
      m.kubernetesPolicyTrainer(kubernetes, settings, logDir, artifacts ? { artifacts } : {}),
    ));
  return { readsArtifactStore: artifacts?.url !== undefined, train: async (job) => (await loaded()).train(job) };
}

export interface PolicyUpdateDeps {
  registry: PolicyRegistry;
  trainer: PolicyTrainer;
  gateway: GatewayControlClient;
  /**
   * The gateway backend new versions are served from, and its endpoints (OpenAI-compatible servers with vLLM's adapter
   * API).
   */
  serving: Serving;
  policiesDir: string;
  signal?: AbortSignal;
  handedBack?: () => boolean;
  /** Where the trainer's log is uploaded while it runs (redacted), under the iteration's update.log. */
  logUpload?: LogUploadSettings;
}

export async function updatePolicy(
  job: PolicyUpdateJob,
  deps: PolicyUpdateDeps,
): Promise<{ policy: PolicyRecord; train: TrainResult }> {
  const parent = await deps.registry.get(job.parentVersion);
  if (!parent)
    throw new PolicyLineageError(
      `policy ${job.parentVersion} is not in the registry; register the base policy before training from it`,
    );
  const outputDir = path.join(deps.policiesDir, job.runId, job.newVersion);
  const train = await deps.trainer.train({
    parentCheckpoint: parent.checkpointUri,
    batchPath: job.batchPath,
    outputDir,
    signal: deps.signal,
    handedBack: deps.handedBack,
    ...(deps.logUpload && {
      followLog: (file: string) =>
        followLog(deps.logUpload as LogUploadSettings, updateLogName(job.runId, job.iteration), file),
    }),
  });
  if (train.batchContentHash !== job.batchContentHash) {
    throw new PolicyLineageError(
      `the trainer read batch ${train.batchContentHash}, the iteration built ${job.batchContentHash}: the batch file changed`,
    );
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
    trainerMetrics: {
      steps: train.steps,
      skippedMinibatches: train.skippedMinibatches,
      seconds: train.seconds,
      ...train.metrics,
      ...(train.stepMetrics && { stepMetrics: train.stepMetrics }),
      ...(train.trainerLogprobs && { trainerLogprobs: train.trainerLogprobs }),
      ...(train.importanceWeights && { importanceWeights: train.importanceWeights }),
    },
  });
  await ensureServed(policy, deps.gateway, deps.serving);
  return { policy, train };
}
