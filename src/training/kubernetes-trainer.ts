import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BatchV1Api, CoreV1Api, type KubeConfig, type V1Container, type V1ContainerStatus, type V1EnvVar, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { isLocalReference } from '../artifacts/folders.js';
import type { ReinConfig, TrainerSettings } from '../config/schema.js';
import { isTransient, loadKubeConfig, messageOf, newestPodOf, noPodCreated, statusOf } from '../kubernetes/api.js';
import { fillPlaceholders, JobTemplateError, parseTemplate } from '../kubernetes/template.js';
import type { TrainResult } from '../policy/local-trainer.js';
import { isTrainerRefusal, PolicySetupError, PolicyUpdateError } from './errors.js';
import type { KubernetesTrainerSettings } from './kubernetes-trainer-settings.js';
import type { PolicyTrainer, TrainInput } from './policy-trainer.js';
import { effectiveLearningRate, TRAINER_CONFIG_ENV, trainerConfigOf } from './trainer-config.js';
import { trainerLogFile } from './trainer-log.js';

/**
 * The policy update as a Kubernetes Job (a GPU trainer in the cluster). The Job comes from the
 * user's template with the batch, parent and output locations filled in; its name derives from
 * the output (one per iteration), so a retried activity finds the Job it started instead of
 * training again. The trainer writes the new checkpoint to `outputDir` (shared storage both
 * sides can reach) and its result as JSON: to its termination message (REIN_RESULT_FILE) or as
 * the last line of its log, as `rein policy train` prints it.
 *
 * With artifacts in S3 there is no shared disk: the pod stages for itself. Init containers of
 * Rein's image pull the batch and the parent into an emptyDir (`rein artifacts pull`), the
 * trainer runs as the last init container on those paths, and the pod's one container pushes the
 * output to its URI (`rein artifacts push`), which the registry then records.
 */

export const TRAIN_OUTPUT_LABEL = 'rein.dev/train-output';
const TRAIN_JOB_LABEL = 'rein.dev/train-job';
const OUTPUT_ANNOTATION = 'rein.dev/output-dir';
/** Set on the trainer container only: how the follower tells it from the template's others and Rein's staging containers. */
const RESULT_FILE_ENV = 'REIN_RESULT_FILE';

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

/** The emptyDir the staging containers and the trainer share, and where each thing goes in it. */
const STAGING_VOLUME = 'rein-staging';
const STAGING_DIR = '/rein-staging';
const STAGED = { parent: `${STAGING_DIR}/parent`, output: `${STAGING_DIR}/out` };
const PULL_BATCH = 'rein-pull-batch';
const PULL_PARENT = 'rein-pull-parent';
const PUSH_OUTPUT = 'rein-push-output';

/**
 * Labels hold a digest of where the output goes: one output, one policy version, one iteration.
 * Its URI when the pod stores it (the same from every worker host), else the shared path.
 */
export function outputDigest(output: string): string {
  return createHash('sha256').update(isLocalReference(output) ? path.resolve(output) : output).digest('hex').slice(0, 16);
}

const outputOf = (job: Pick<TrainingJob, 'outputDir' | 'outputUri'>) => job.outputUri ?? job.outputDir;

export function trainingJobName(output: string, attempt: number): string {
  return `rein-train-${outputDigest(output)}-${attempt}`;
}

/** What the staging containers need to reach the store: artifacts.url and its S3 settings, as `rein` reads them from its environment. */
export function podStaging(settings: KubernetesTrainerSettings, trainer: Pick<TrainerSettings, 'engine'>, artifacts: ReinConfig['artifacts']): PodStaging | undefined {
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

/** Renders the template for one training attempt; problems in the template are JobTemplateErrors. */
export function renderTrainingJob(
  templateText: string,
  settings: KubernetesTrainerSettings,
  trainer: Omit<TrainerSettings, 'kubernetes' | 'servingBackend'>,
  job: TrainingJob,
  attempt: number,
  staging?: PodStaging,
): V1Job {
  const inPod = job.outputUri !== undefined;
  if (inPod && !staging) throw new Error('a Job that stores its own output needs the artifact store settings');
  const pullsParent = inPod && !isLocalReference(job.parentCheckpoint);
  const stagedBatch = `${STAGING_DIR}/batch/${path.posix.basename(job.batchPath)}`;
  const jobName = trainingJobName(outputOf(job), attempt);
  const values = {
    jobName,
    namespace: settings.namespace,
    image: settings.image,
    parentCheckpoint: pullsParent ? STAGED.parent : job.parentCheckpoint,
    batchPath: inPod ? stagedBatch : job.batchPath,
    outputDir: inPod ? STAGED.output : job.outputDir,
    learningRate: String(effectiveLearningRate(trainer)),
    epochs: String(trainer.epochs),
    minibatchSize: String(trainer.minibatchSize),
    clipEpsilon: String(trainer.clipEpsilon),
    maxGradNorm: String(trainer.maxGradNorm),
    seed: String(trainer.seed),
    engine: trainer.engine,
    // The PyTorch trainer's settings; loraRank 0 means full fine-tuning.
    loraRank: String(trainer.pytorch.lora?.rank ?? 0),
    loraAlpha: String(trainer.pytorch.lora?.alpha ?? 0),
    loraDropout: String(trainer.pytorch.lora?.dropout ?? 0),
    loraTargetModules: (trainer.pytorch.lora?.targetModules ?? ['q_proj']).join(','),
    device: trainer.pytorch.device,
    dtype: trainer.pytorch.dtype,
    maxTokensPerMicroBatch: String(trainer.pytorch.maxTokensPerMicroBatch),
  };
  const manifest = fillPlaceholders(parseTemplate(templateText), values) as V1Job;
  if (manifest === null || typeof manifest !== 'object' || manifest.apiVersion !== 'batch/v1' || manifest.kind !== 'Job') {
    throw new JobTemplateError('the training Job template must be a manifest with apiVersion batch/v1, kind Job');
  }
  const spec = manifest.spec;
  const podSpec = spec?.template?.spec;
  const containers = podSpec?.containers ?? [];
  const container = settings.container === undefined ? containers[0] : containers.find((c) => c.name === settings.container);
  if (!spec || !podSpec || !container) throw new JobTemplateError(`the training Job template has no ${settings.container ? `container named "${settings.container}"` : 'spec.template.spec.containers'}`);
  if (spec.backoffLimit !== undefined && spec.backoffLimit !== 0) throw new JobTemplateError(`the training Job template sets backoffLimit ${spec.backoffLimit}; remove it (Rein retries as new Jobs it can account for)`);
  if (podSpec.restartPolicy !== undefined && podSpec.restartPolicy !== 'Never') throw new JobTemplateError(`the training Job template sets restartPolicy ${podSpec.restartPolicy}; remove it`);
  if ((spec.completions ?? 1) !== 1 || (spec.parallelism ?? 1) !== 1) throw new JobTemplateError('the training Job template must run one pod (completions and parallelism 1); a distributed trainer runs its workers from that pod');

  const labels = { 'app.kubernetes.io/managed-by': 'rein', [TRAIN_OUTPUT_LABEL]: outputDigest(outputOf(job)), [TRAIN_JOB_LABEL]: jobName };
  const resultFile = container.terminationMessagePath ?? '/dev/termination-log';
  const trained: V1Container = {
    ...container,
    image: container.image ?? settings.image,
    terminationMessagePath: resultFile,
    terminationMessagePolicy: container.terminationMessagePolicy ?? 'FallbackToLogsOnError',
    // The update's settings as the PyTorch trainer reads them (its flags in the template, if any, override them).
    env: [
      ...(container.env ?? []).filter((e) => e.name !== RESULT_FILE_ENV && e.name !== TRAINER_CONFIG_ENV),
      { name: RESULT_FILE_ENV, value: resultFile },
      { name: TRAINER_CONFIG_ENV, value: JSON.stringify(trainerConfigOf(trainer)) },
    ],
  };
  let pod = { ...podSpec, restartPolicy: 'Never', containers: containers.map((c) => (c === container ? trained : c)) };
  if (inPod && staging) {
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
    if ((podSpec.volumes ?? []).some((v) => v.name === STAGING_VOLUME)) throw new JobTemplateError(`the training Job template has a volume named ${STAGING_VOLUME}; rename it (Rein adds that one when artifacts are in S3)`);
    pod = {
      ...pod,
      volumes: [...(podSpec.volumes ?? []), { name: STAGING_VOLUME, emptyDir: {} }],
      // The trainer is the last init container: the push runs only after it succeeded.
      initContainers: [
        ...(podSpec.initContainers ?? []),
        rein(PULL_BATCH, ['artifacts', 'pull', job.batchPath, stagedBatch]),
        ...(pullsParent ? [rein(PULL_PARENT, ['artifacts', 'pull', job.parentCheckpoint, STAGED.parent])] : []),
        { ...trained, volumeMounts: [...(trained.volumeMounts ?? []), mount] },
      ],
      containers: [...containers.filter((c) => c !== container), rein(PUSH_OUTPUT, ['artifacts', 'push', STAGED.output, job.outputUri as string])],
    };
  }
  return {
    ...manifest,
    metadata: { ...manifest.metadata, name: jobName, namespace: settings.namespace, labels: { ...manifest.metadata?.labels, ...labels }, annotations: { ...manifest.metadata?.annotations, [OUTPUT_ANNOTATION]: outputOf(job) } },
    spec: {
      ...spec,
      backoffLimit: 0,
      ttlSecondsAfterFinished: spec.ttlSecondsAfterFinished ?? settings.ttlSecondsAfterFinished,
      template: {
        ...spec.template,
        metadata: { ...spec.template.metadata, labels: { ...spec.template.metadata?.labels, ...labels } },
        spec: pod,
      },
    },
  };
}

export interface KubernetesTrainerOptions {
  kubeConfig?: KubeConfig;
  /** Where artifacts live; with artifacts.url set, each pod pulls and pushes them itself. */
  artifacts?: ReinConfig['artifacts'];
  /** How often the Job and its pod are read. Default 2 s. */
  pollMs?: number;
}

/** A PolicyTrainer that runs each update as a Kubernetes Job and follows it to the end. */
export function kubernetesPolicyTrainer(settings: KubernetesTrainerSettings, trainer: Omit<TrainerSettings, 'kubernetes' | 'servingBackend'>, logDir: string, options: KubernetesTrainerOptions = {}): PolicyTrainer {
  const { namespace } = settings;
  const pollMs = options.pollMs ?? 2000;
  let clients: { batch: BatchV1Api; core: CoreV1Api } | undefined;
  const apis = () => {
    const config = options.kubeConfig ?? loadKubeConfig(settings);
    return (clients ??= { batch: config.makeApiClient(BatchV1Api), core: config.makeApiClient(CoreV1Api) });
  };
  /** Calls the API, riding out what a busy or restarting API server answers. */
  const call = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    for (let tryNumber = 1; ; tryNumber++) {
      try {
        return await fn();
      } catch (err) {
        if (isTransient(err) && tryNumber < 5) {
          await sleep(250 * 2 ** tryNumber);
          continue;
        }
        const status = statusOf(err);
        const message = `${what} in namespace ${namespace} failed${status ? ` (${status})` : ''}: ${messageOf(err)}`;
        if (status === 401 || status === 403) throw new PolicySetupError(`${message}; check the trainer's kubeconfig and RBAC (create/get/list/delete jobs, get/list pods and pods/log)`);
        // The API server refuses the Job as the template makes it: a retry would be refused again.
        if (status === 400 || status === 422) throw new PolicySetupError(`${message}; fix trainer.kubernetes.template`);
        throw new PolicyUpdateError(message);
      }
    }
  };
  const deleteJob = async (name: string) => {
    await call(`deleting Job ${name}`, () => apis().batch.deleteNamespacedJob({ name, namespace, propagationPolicy: 'Background' })).catch((err: unknown) => {
      if (!(err instanceof PolicyUpdateError && /\(404\)/.test(err.message))) throw err;
    });
  };

  return {
    readsArtifactStore: options.artifacts?.url !== undefined,
    async train(job) {
      let templateText: string;
      try {
        templateText = readFileSync(settings.template, 'utf8');
      } catch (err) {
        throw new PolicySetupError(`trainer.kubernetes.template cannot be read: ${(err as Error).message}`);
      }
      const labelSelector = `${TRAIN_OUTPUT_LABEL}=${outputDigest(outputOf(job))}`;
      const existing = (await call('listing training Jobs', () => apis().batch.listNamespacedJob({ namespace, labelSelector }))).items;
      const done = existing.find((j) => conditionOf(j, 'Complete'));
      const running = existing.find((j) => !conditionOf(j, 'Complete') && !conditionOf(j, 'Failed'));
      // A Job that trained this output already, or is training it now, is followed, never repeated.
      let name = done?.metadata?.name ?? running?.metadata?.name;
      if (!name) {
        let body: V1Job;
        try {
          const staging = job.outputUri !== undefined && options.artifacts ? podStaging(settings, trainer, options.artifacts) : undefined;
          body = renderTrainingJob(templateText, settings, trainer, job, existing.length + 1, staging);
        } catch (err) {
          if (err instanceof JobTemplateError) throw new PolicySetupError(`trainer.kubernetes.template: ${err.message}`);
          throw err;
        }
        name = body.metadata?.name as string;
        await call(`creating Job ${name}`, () => apis().batch.createNamespacedJob({ namespace, body })).catch((err: unknown) => {
          if (!(err instanceof PolicyUpdateError && /\(409\)/.test(err.message))) throw err;
        });
      }
      try {
        return await follow(name, job);
      } catch (err) {
        if (err instanceof TrainingTimeout || (job.signal?.aborted && job.handedBack?.() !== true)) await deleteJob(name);
        throw err;
      }
    },
  };

  async function follow(name: string, job: TrainInput): Promise<TrainResult> {
    const created = Date.now();
    let startedAt: number | undefined;
    for (;;) {
      if (job.signal?.aborted) {
        throw new PolicyUpdateError(
          job.handedBack?.() === true
            ? `the policy update was handed back (its worker is going away); Job ${name} runs on for the next try to follow`
            : `the policy update was cancelled; Job ${name} deleted`,
        );
      }
      const current = await call(`reading Job ${name}`, () => apis().batch.readNamespacedJob({ name, namespace }));
      const pods = (await call(`listing the pods of Job ${name}`, () => apis().core.listNamespacedPod({ namespace, labelSelector: `${TRAIN_JOB_LABEL}=${name}` }))).items;
      const pod = newestPodOf(pods);
      const trainerName = trainerContainerOf(pod);
      const container = statusesOf(pod).find((s) => s.name === trainerName);
      // Started once any container runs: with artifacts in S3 the pulls come first, and count as training time.
      const firstStart = statusesOf(pod).find((s) => s.state?.running?.startedAt || s.state?.terminated?.startedAt)?.state;
      const firstStartedAt = firstStart?.running?.startedAt ?? firstStart?.terminated?.startedAt;
      if (firstStartedAt && startedAt === undefined) startedAt = new Date(firstStartedAt).getTime();
      if (conditionOf(current, 'Complete') || conditionOf(current, 'Failed')) {
        const log = pod?.metadata?.name ? await keepLog(pod.metadata.name, trainerName, job.outputDir) : '';
        if (conditionOf(current, 'Failed')) {
          // The container that failed: the trainer, or a pull before it or the push after it.
          const failed = statusesOf(pod).find((s) => (s.state?.terminated?.exitCode ?? 0) !== 0) ?? container;
          const terminated = failed?.state?.terminated;
          const failedLog = failed && failed.name !== trainerName && pod?.metadata?.name ? await readLog(pod.metadata.name, failed.name) : log;
          const Failure = isTrainerRefusal(terminated?.exitCode) ? PolicySetupError : PolicyUpdateError;
          const which = failed && failed.name !== trainerName ? ` in container ${failed.name}` : '';
          throw new Failure(
            `training Job ${name} failed${which} (${terminated ? `exit ${terminated.exitCode}${terminated.reason ? `, ${terminated.reason}` : ''}` : (conditionOf(current, 'Failed')?.reason ?? 'no pod ran')}): ${(terminated?.message ?? failedLog).trim().slice(-800)}`,
          );
        }
        return resultOf(name, container?.state?.terminated?.message, log);
      }
      if (startedAt === undefined && Date.now() - created > settings.pendingTimeoutSeconds * 1000) {
        const why = pod ? (container?.state?.waiting?.reason ?? pod.status?.conditions?.find((c) => c.status === 'False')?.reason ?? 'pending') : noPodCreated(name, namespace);
        throw new TrainingTimeout(`training Job ${name} did not start within ${settings.pendingTimeoutSeconds} s (${why}); deleted`);
      }
      if (startedAt !== undefined && Date.now() - startedAt > settings.timeoutSeconds * 1000) {
        throw new TrainingTimeout(`training Job ${name} ran past trainer.kubernetes.timeoutSeconds (${settings.timeoutSeconds} s); deleted`);
      }
      await sleep(pollMs, undefined, job.signal ? { signal: job.signal } : undefined).catch(() => undefined);
    }
  }

  /** The trainer's log, kept beside the local trainer's logs. */
  async function keepLog(podName: string, container: string | undefined, outputDir: string): Promise<string> {
    const log = await readLog(podName, container);
    writeFileSync(trainerLogFile(logDir, outputDir), log);
    return log;
  }

  function readLog(podName: string, container: string | undefined): Promise<string> {
    return call(`reading the log of pod ${podName}`, () => apis().core.readNamespacedPodLog({ name: podName, namespace, ...(container && { container }) })).catch(() => '');
  }
}

/** Init containers first, in the order they run. */
function statusesOf(pod: V1Pod | undefined): V1ContainerStatus[] {
  return [...(pod?.status?.initContainerStatuses ?? []), ...(pod?.status?.containerStatuses ?? [])];
}

/** The trainer container's name: the one Rein gave REIN_RESULT_FILE (an init container when the pod stages from S3). */
function trainerContainerOf(pod: V1Pod | undefined): string | undefined {
  return [...(pod?.spec?.initContainers ?? []), ...(pod?.spec?.containers ?? [])].find((c) => c.env?.some((e) => e.name === RESULT_FILE_ENV))?.name;
}

class TrainingTimeout extends PolicyUpdateError {}

function conditionOf(job: V1Job, type: 'Complete' | 'Failed') {
  return job.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}

/** The trainer's result: its termination message, else the last JSON line of its log. */
function resultOf(jobName: string, message: string | undefined, log: string): TrainResult {
  const candidates = [message?.trim(), ...log.trim().split('\n').reverse()].filter((l): l is string => !!l && l.startsWith('{'));
  for (const line of candidates) {
    try {
      const result = JSON.parse(line) as TrainResult;
      if (typeof result.batchContentHash === 'string' && typeof result.steps === 'number') return result;
    } catch {
      // not the result line
    }
  }
  throw new PolicyUpdateError(`training Job ${jobName} succeeded but left no result: write the trainer's JSON result to $REIN_RESULT_FILE or as the last line of its log`);
}
