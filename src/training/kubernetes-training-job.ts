import { createHash } from 'node:crypto';
import path from 'node:path';
import type { V1Container, V1EnvVar, V1Job, V1PodSpec } from '@kubernetes/client-node';
import { isLocalReference } from '../artifacts/folders.js';
import type { ReinConfig, TrainerSettings } from '../config/schema.js';
import {
  jobTemplateProblems,
  MANAGED_BY_LABEL,
  overlayJob,
  programContainer,
  withReinEnvironment,
  type TemplateRules,
} from '../kubernetes/job-overlay.js';
import { fillPlaceholders, JobTemplateError, parseTemplate } from '../kubernetes/template.js';
import { PolicySetupError } from './errors.js';
import type { KubernetesTrainerSettings } from './kubernetes-trainer-settings.js';
import { effectiveLearningRate, TRAINER_CONFIG_ENV, trainerConfigOf } from './trainer-config.js';

/**
 * A policy update's Kubernetes Job, from the user's template with the batch, parent and output
 * locations and the trainer settings filled in, Rein's overlay on it (kubernetes/job-overlay.ts),
 * and, with artifacts in S3, the containers that stage them: init containers of Rein's image pull
 * the batch and the parent into an emptyDir (`rein artifacts pull`), the trainer runs as the last
 * init container on those paths, and the pod's one container pushes the output to its URI
 * (`rein artifacts push`).
 */

export const TRAIN_OUTPUT_LABEL = 'rein.dev/train-output';
export const TRAIN_JOB_LABEL = 'rein.dev/train-job';
const OUTPUT_ANNOTATION = 'rein.dev/output-dir';
/**
 * Set on the trainer container only: how the follower tells it from the template's others and Rein's staging
 * containers.
 */
export const RESULT_FILE_ENV = 'REIN_RESULT_FILE';

export interface TrainingJob {
  parentCheckpoint: string;
  batchPath: string;
  outputDir: string;
  /** Where the pod itself stores the output (artifacts in S3); the batch and parent are then URIs it pulls. */
  outputUri?: string | undefined;
}

/** How a pod reaches the artifact store: Rein's image, and the store's settings as environment. */
export interface PodStaging {
  image: string;
  env: V1EnvVar[];
  secret?: string | undefined;
}

/** The settings a training Job is rendered with: the trainer section less where it runs and what serves its output. */
export type TrainerJobSettings = Omit<TrainerSettings, 'kubernetes' | 'servingBackend'>;

/** The emptyDir the staging containers and the trainer share, and where each thing goes in it. */
const STAGING_VOLUME = 'rein-staging';
const STAGING_DIR = '/rein-staging';
const STAGED = { parent: `${STAGING_DIR}/parent`, output: `${STAGING_DIR}/out` };
const PULL_BATCH = 'rein-pull-batch';
const PULL_PARENT = 'rein-pull-parent';
const PUSH_OUTPUT = 'rein-push-output';

const TRAINING_RULES: TemplateRules = {
  program: 'trainer',
  retries: 'Rein retries as new Jobs it can account for',
  onePod: '; a distributed trainer runs its workers from that pod',
};

/**
 * Labels hold a digest of where the output goes: one output, one policy version, one iteration.
 * Its URI when the pod stores it (the same from every worker host), else the shared path.
 */
export function outputDigest(output: string): string {
  return createHash('sha256')
    .update(isLocalReference(output) ? path.resolve(output) : output)
    .digest('hex')
    .slice(0, 16);
}

export const outputOf = (job: Pick<TrainingJob, 'outputDir' | 'outputUri'>): string => job.outputUri ?? job.outputDir;

export function trainingJobName(output: string, attempt: number): string {
  return `rein-train-${outputDigest(output)}-${attempt}`;
}

/**
 * What the staging containers need to reach the store: artifacts.url and its S3 settings, as `rein` reads them from its
 * environment.
 */
export function podStaging(
  settings: KubernetesTrainerSettings,
  trainer: Pick<TrainerSettings, 'engine'>,
  artifacts: ReinConfig['artifacts'],
): PodStaging | undefined {
  if (!artifacts.url) return undefined;
  const image = settings.artifactsImage ?? (trainer.engine === 'tfjs' ? settings.image : undefined);
  if (!image) {
    throw new PolicySetupError(
      "artifacts are in S3 (artifacts.url), so the training pod pulls and pushes them with Rein's image, and the PyTorch trainer's image has no `rein`: set trainer.kubernetes.artifactsImage to Rein's image (the one `rein worker` runs)",
    );
  }
  const { endpoint, region, forcePathStyle } = artifacts.s3;
  const env: V1EnvVar[] = [
    { name: 'REIN_ARTIFACTS_URL', value: artifacts.url },
    ...(endpoint ? [{ name: 'REIN_S3_ENDPOINT', value: endpoint }] : []),
    ...(region ? [{ name: 'REIN_S3_REGION', value: region }] : []),
    ...(forcePathStyle !== undefined ? [{ name: 'REIN_S3_FORCE_PATH_STYLE', value: String(forcePathStyle) }] : []),
  ];
  return { image, env, secret: settings.artifactsSecret };
}

/** Where the trainer reads and writes: the job's own paths, or the staging folder's when the pod stages from S3. */
function trainerPaths(job: TrainingJob) {
  const inPod = job.outputUri !== undefined;
  const pullsParent = inPod && !isLocalReference(job.parentCheckpoint);
  const stagedBatch = `${STAGING_DIR}/batch/${path.posix.basename(job.batchPath)}`;
  return {
    inPod,
    pullsParent,
    parentCheckpoint: pullsParent ? STAGED.parent : job.parentCheckpoint,
    batchPath: inPod ? stagedBatch : job.batchPath,
    outputDir: inPod ? STAGED.output : job.outputDir,
  };
}

/** The template's placeholders for one attempt. */
function placeholderValues(
  settings: KubernetesTrainerSettings,
  trainer: TrainerJobSettings,
  job: TrainingJob,
  attempt: number,
): Record<string, string> {
  const { parentCheckpoint, batchPath, outputDir } = trainerPaths(job);
  const { lora, device, dtype, maxTokensPerMicroBatch } = trainer.pytorch;
  return {
    jobName: trainingJobName(outputOf(job), attempt),
    namespace: settings.namespace,
    image: settings.image,
    parentCheckpoint,
    batchPath,
    outputDir,
    learningRate: String(effectiveLearningRate(trainer)),
    epochs: String(trainer.epochs),
    minibatchSize: String(trainer.minibatchSize),
    clipEpsilon: String(trainer.clipEpsilon),
    maxGradNorm: String(trainer.maxGradNorm),
    seed: String(trainer.seed),
    engine: trainer.engine,
    // The PyTorch trainer's settings; loraRank 0 means full fine-tuning.
    loraRank: String(lora?.rank ?? 0),
    loraAlpha: String(lora?.alpha ?? 0),
    loraDropout: String(lora?.dropout ?? 0),
    loraTargetModules: (lora?.targetModules ?? ['q_proj']).join(','),
    device,
    dtype,
    maxTokensPerMicroBatch: String(maxTokensPerMicroBatch),
  };
}

/** Renders the template for one training attempt; problems in the template are JobTemplateErrors. */
export function renderTrainingJob(
  templateText: string,
  settings: KubernetesTrainerSettings,
  trainer: TrainerJobSettings,
  job: TrainingJob,
  attempt: number,
  staging?: PodStaging,
): V1Job {
  if (job.outputUri !== undefined && !staging)
    throw new Error('a Job that stores its own output needs the artifact store settings');
  const values = placeholderValues(settings, trainer, job, attempt);
  const manifest = fillPlaceholders(parseTemplate(templateText), values) as V1Job;
  const problems = jobTemplateProblems(manifest, settings.container, TRAINING_RULES);
  if (problems.length > 0) throw new JobTemplateError(`the training Job template ${problems.join('; ')}`);

  const podSpec = manifest.spec?.template.spec as V1PodSpec;
  const container = programContainer(podSpec.containers, settings.container) as V1Container;
  // The update's settings as the PyTorch trainer reads them (its flags in the template, if any, override them).
  const trainerEnv = { [TRAINER_CONFIG_ENV]: JSON.stringify(trainerConfigOf(trainer)) };
  const trained = withReinEnvironment(container, {
    image: settings.image,
    env: trainerEnv,
    resultFileEnv: RESULT_FILE_ENV,
  });
  const pod = { ...podSpec, containers: podSpec.containers.map((c) => (c === container ? trained : c)) };
  return overlayJob(
    manifest,
    {
      name: values.jobName as string,
      namespace: settings.namespace,
      labels: {
        [MANAGED_BY_LABEL]: 'rein',
        [TRAIN_OUTPUT_LABEL]: outputDigest(outputOf(job)),
        [TRAIN_JOB_LABEL]: values.jobName as string,
      },
      annotations: { [OUTPUT_ANNOTATION]: outputOf(job) },
      annotatePod: false,
      ttlSecondsAfterFinished: settings.ttlSecondsAfterFinished,
    },
    staging && job.outputUri !== undefined ? stagingPod(pod, trained, job, staging) : pod,
  );
}

/**
 * The pod with the staging containers around the trainer, which becomes the last init container: the push runs only
 * after it succeeded.
 */
function stagingPod(pod: V1PodSpec, trained: V1Container, job: TrainingJob, staging: PodStaging): V1PodSpec {
  const { pullsParent, batchPath } = trainerPaths(job);
  const mount = { name: STAGING_VOLUME, mountPath: STAGING_DIR };
  const rein = (name: string, args: string[]): V1Container => ({
    name,
    image: staging.image,
    command: ['rein'],
    args,
    env: staging.env,
    ...(staging.secret && { envFrom: [{ secretRef: { name: staging.secret } }] }),
    volumeMounts: [mount],
  });
  if ((pod.volumes ?? []).some((v) => v.name === STAGING_VOLUME))
    throw new JobTemplateError(
      `the training Job template has a volume named ${STAGING_VOLUME}; rename it (Rein adds that one when artifacts are in S3)`,
    );
  return {
    ...pod,
    volumes: [...(pod.volumes ?? []), { name: STAGING_VOLUME, emptyDir: {} }],
    initContainers: [
      ...(pod.initContainers ?? []),
      rein(PULL_BATCH, ['artifacts', 'pull', job.batchPath, batchPath]),
      ...(pullsParent ? [rein(PULL_PARENT, ['artifacts', 'pull', job.parentCheckpoint, STAGED.parent])] : []),
      { ...trained, volumeMounts: [...(trained.volumeMounts ?? []), mount] },
    ],
    containers: [
      ...pod.containers.filter((c) => c !== trained),
      rein(PUSH_OUTPUT, ['artifacts', 'push', STAGED.output, job.outputUri as string]),
    ],
  };
}
