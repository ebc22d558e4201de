import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BatchV1Api, CoreV1Api, type KubeConfig, type V1Container, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { z } from 'zod';
import type { TrainerSettings } from '../config/schema.js';
import { clusterSettingsShape, dnsLabel, isTransient, loadKubeConfig, messageOf, newestPodOf, noPodCreated, statusOf } from '../kubernetes/api.js';
import { fillPlaceholders, JobTemplateError, parseTemplate } from '../kubernetes/template.js';
import type { TrainResult } from '../policy/local-trainer.js';
import { isTrainerRefusal, PolicySetupError, PolicyUpdateError } from './errors.js';
import { effectiveLearningRate, type PolicyTrainer, type TrainInput } from './policy-update.js';
import { trainerLogFile } from './trainer-log.js';

/**
 * The policy update as a Kubernetes Job (a GPU trainer in the cluster). The Job comes from the
 * user's template with the batch, parent and output locations filled in; its name derives from
 * the output (one per iteration), so a retried activity finds the Job it started instead of
 * training again. The trainer writes the new checkpoint to `outputDir` (shared storage both
 * sides can reach) and its result as JSON: to its termination message (REIN_RESULT_FILE) or as
 * the last line of its log, as `rein policy train` prints it.
 */
export const kubernetesTrainerSchema = z.strictObject({
  template: z.string().min(1).describe('A Job manifest (YAML) with {{placeholders}}; a path relative to the config file'),
  image: z.string().min(1).describe('The trainer image, for {{image}} and containers without one'),
  namespace: dnsLabel.default('default').describe('Where the training Jobs are created'),
  container: z.string().min(1).optional().describe('The container that trains (the first one when unset)'),
  timeoutSeconds: z.number().positive().max(7 * 86_400).default(6 * 3600).describe('Longest training, counted from the container start'),
  pendingTimeoutSeconds: z.number().positive().max(86_400).default(1800).describe('Longest wait for the pod to be scheduled and start (GPUs can be scarce)'),
  ttlSecondsAfterFinished: z.number().int().min(0).default(86_400).describe('Kubernetes deletes a finished Job this long after it ends'),
  ...clusterSettingsShape,
});
export type KubernetesTrainerSettings = z.output<typeof kubernetesTrainerSchema>;

export const TRAIN_OUTPUT_LABEL = 'rein.dev/train-output';
const TRAIN_JOB_LABEL = 'rein.dev/train-job';
const OUTPUT_ANNOTATION = 'rein.dev/output-dir';

export interface TrainingJob {
  parentCheckpoint: string;
  batchPath: string;
  outputDir: string;
}

/** Labels hold a digest of the output directory: one output, one policy version, one iteration. */
export function outputDigest(outputDir: string): string {
  return createHash('sha256').update(path.resolve(outputDir)).digest('hex').slice(0, 16);
}

export function trainingJobName(outputDir: string, attempt: number): string {
  return `rein-train-${outputDigest(outputDir)}-${attempt}`;
}

/** Renders the template for one training attempt; problems in the template are JobTemplateErrors. */
export function renderTrainingJob(templateText: string, settings: KubernetesTrainerSettings, trainer: Omit<TrainerSettings, 'kubernetes' | 'servingBackend'>, job: TrainingJob, attempt: number): V1Job {
  const jobName = trainingJobName(job.outputDir, attempt);
  const values = {
    jobName,
    namespace: settings.namespace,
    image: settings.image,
    parentCheckpoint: job.parentCheckpoint,
    batchPath: job.batchPath,
    outputDir: job.outputDir,
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

  const labels = { 'app.kubernetes.io/managed-by': 'rein', [TRAIN_OUTPUT_LABEL]: outputDigest(job.outputDir), [TRAIN_JOB_LABEL]: jobName };
  const resultFile = container.terminationMessagePath ?? '/dev/termination-log';
  const trained: V1Container = {
    ...container,
    image: container.image ?? settings.image,
    terminationMessagePath: resultFile,
    terminationMessagePolicy: container.terminationMessagePolicy ?? 'FallbackToLogsOnError',
    env: [...(container.env ?? []).filter((e) => e.name !== 'REIN_RESULT_FILE'), { name: 'REIN_RESULT_FILE', value: resultFile }],
  };
  return {
    ...manifest,
    metadata: { ...manifest.metadata, name: jobName, namespace: settings.namespace, labels: { ...manifest.metadata?.labels, ...labels }, annotations: { ...manifest.metadata?.annotations, [OUTPUT_ANNOTATION]: job.outputDir } },
    spec: {
      ...spec,
      backoffLimit: 0,
      ttlSecondsAfterFinished: spec.ttlSecondsAfterFinished ?? settings.ttlSecondsAfterFinished,
      template: {
        ...spec.template,
        metadata: { ...spec.template.metadata, labels: { ...spec.template.metadata?.labels, ...labels } },
        spec: { ...podSpec, restartPolicy: 'Never', containers: containers.map((c) => (c === container ? trained : c)) },
      },
    },
  };
}

export interface KubernetesTrainerOptions {
  kubeConfig?: KubeConfig;
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
    async train(job) {
      let templateText: string;
      try {
        templateText = readFileSync(settings.template, 'utf8');
      } catch (err) {
        throw new PolicySetupError(`trainer.kubernetes.template cannot be read: ${(err as Error).message}`);
      }
      const labelSelector = `${TRAIN_OUTPUT_LABEL}=${outputDigest(job.outputDir)}`;
      const existing = (await call('listing training Jobs', () => apis().batch.listNamespacedJob({ namespace, labelSelector }))).items;
      const done = existing.find((j) => conditionOf(j, 'Complete'));
      const running = existing.find((j) => !conditionOf(j, 'Complete') && !conditionOf(j, 'Failed'));
      // A Job that trained this output already, or is training it now, is followed, never repeated.
      let name = done?.metadata?.name ?? running?.metadata?.name;
      if (!name) {
        let body: V1Job;
        try {
          body = renderTrainingJob(templateText, settings, trainer, job, existing.length + 1);
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
      const container = containerStatus(pod);
      if (container?.state?.running?.startedAt && startedAt === undefined) startedAt = new Date(container.state.running.startedAt).getTime();
      if (conditionOf(current, 'Complete') || conditionOf(current, 'Failed')) {
        const log = pod?.metadata?.name ? await keepLog(pod.metadata.name, job.outputDir) : '';
        if (conditionOf(current, 'Failed')) {
          const terminated = container?.state?.terminated;
          const Failure = isTrainerRefusal(terminated?.exitCode) ? PolicySetupError : PolicyUpdateError;
          throw new Failure(
            `training Job ${name} failed (${terminated ? `exit ${terminated.exitCode}${terminated.reason ? `, ${terminated.reason}` : ''}` : (conditionOf(current, 'Failed')?.reason ?? 'no pod ran')}): ${(terminated?.message ?? log).trim().slice(-800)}`,
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

  function containerStatus(pod: V1Pod | undefined) {
    const statuses = pod?.status?.containerStatuses ?? [];
    return settings.container === undefined ? statuses[0] : statuses.find((s) => s.name === settings.container);
  }

  /** The pod's log, kept beside the local trainer's logs. */
  async function keepLog(podName: string, outputDir: string): Promise<string> {
    const log = await call(`reading the log of pod ${podName}`, () => apis().core.readNamespacedPodLog({ name: podName, namespace, ...(settings.container && { container: settings.container }) })).catch(() => '');
    writeFileSync(trainerLogFile(logDir, outputDir), log);
    return log;
  }
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
