import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  BatchV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1ContainerStatus,
  type V1Job,
  type V1Pod,
} from '@kubernetes/client-node';
import type { ReinConfig } from '../config/schema.js';
import { loadKubeConfig, messageOf, newestPodOf, noPodCreated, statusOf } from '../kubernetes/api.js';
import { createJob, withRetries } from '../kubernetes/api-retry.js';
import { JobTemplateError } from '../kubernetes/template.js';
import type { TrainResult } from '../policy/local-trainer.js';
import { isTrainerRefusal, PolicySetupError, PolicyUpdateError } from './errors.js';
import type { KubernetesTrainerSettings } from './kubernetes-trainer-settings.js';
import {
  outputDigest,
  outputOf,
  podStaging,
  RESULT_FILE_ENV,
  renderTrainingJob,
  TRAIN_JOB_LABEL,
  TRAIN_OUTPUT_LABEL,
  type TrainerJobSettings,
} from './kubernetes-training-job.js';
import type { PolicyTrainer, TrainInput } from './policy-trainer.js';
import { trainerLogFile } from './trainer-log.js';

export { trainingJobName } from './kubernetes-training-job.js';

/**
 * The policy update as a Kubernetes Job (a GPU trainer in the cluster), made from the user's
 * template by kubernetes-training-job.ts. Its name derives from the output (one per iteration),
 * so a retried activity finds the Job it started instead of training again. The trainer writes
 * the new checkpoint to `outputDir` (shared storage both sides can reach) or, with artifacts in
 * S3, the pod pushes it to its URI, which the registry then records; the trainer's result is JSON
 * in its termination message (REIN_RESULT_FILE) or the last line of its log, as `rein policy
 * train` prints it.
 */
export interface KubernetesTrainerOptions {
  kubeConfig?: KubeConfig;
  /** Where artifacts live; with artifacts.url set, each pod pulls and pushes them itself. */
  artifacts?: ReinConfig['artifacts'];
  /** How often the Job and its pod are read. Default 2 s. */
  pollMs?: number;
}

/** A PolicyTrainer that runs each update as a Kubernetes Job and follows it to the end. */
export function kubernetesPolicyTrainer(
  settings: KubernetesTrainerSettings,
  trainer: TrainerJobSettings,
  logDir: string,
  options: KubernetesTrainerOptions = {},
): PolicyTrainer {
  const jobs = new TrainingJobs(settings, trainer, logDir, options);
  return {
    readsArtifactStore: options.artifacts?.url !== undefined,
    async train(job) {
      const name = await jobs.findOrCreate(job);
      try {
        return await jobs.follow(name, job);
      } catch (err) {
        if (err instanceof TrainingTimeout || (job.signal?.aborted && job.handedBack?.() !== true))
          await jobs.delete(name);
        throw err;
      }
    },
  };
}

/** The training Jobs of one namespace, through the API server. */
class TrainingJobs {
  private clients: { batch: BatchV1Api; core: CoreV1Api } | undefined;
  private readonly namespace: string;
  private readonly pollMs: number;

  constructor(
    private readonly settings: KubernetesTrainerSettings,
    private readonly trainer: TrainerJobSettings,
    private readonly logDir: string,
    private readonly options: KubernetesTrainerOptions,
  ) {
    this.namespace = settings.namespace;
    this.pollMs = options.pollMs ?? 2000;
  }

  private apis() {
    const config = this.options.kubeConfig ?? loadKubeConfig(this.settings);
    return (this.clients ??= { batch: config.makeApiClient(BatchV1Api), core: config.makeApiClient(CoreV1Api) });
  }

  /**
   * Calls the API, riding out what a busy or restarting API server answers; what fails is a PolicySetupError or
   * PolicyUpdateError.
   */
  private call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return withRetries(fn, API_TRIES).catch((err: unknown) => {
      throw apiFailure(what, this.namespace, err);
    });
  }

  /** The Job that trained this output already, or is training it now (followed, never repeated), else a new one. */
  async findOrCreate(job: TrainInput): Promise<string> {
    const { namespace, settings } = this;
    let templateText: string;
    try {
      templateText = readFileSync(settings.template, 'utf8');
    } catch (err) {
      throw new PolicySetupError(`trainer.kubernetes.template cannot be read: ${(err as Error).message}`);
    }
    const labelSelector = `${TRAIN_OUTPUT_LABEL}=${outputDigest(outputOf(job))}`;
    const existing = (
      await this.call('listing training Jobs', () => this.apis().batch.listNamespacedJob({ namespace, labelSelector }))
    ).items;
    const done = existing.find((j) => conditionOf(j, 'Complete'));
    const running = existing.find((j) => !conditionOf(j, 'Complete') && !conditionOf(j, 'Failed'));
    const found = done?.metadata?.name ?? running?.metadata?.name;
    if (found) return found;
    let body: V1Job;
    try {
      const staging =
        job.outputUri !== undefined && this.options.artifacts
          ? podStaging(settings, this.trainer, this.options.artifacts)
          : undefined;
      body = renderTrainingJob(templateText, settings, this.trainer, job, existing.length + 1, staging);
    } catch (err) {
      if (err instanceof JobTemplateError) throw new PolicySetupError(`trainer.kubernetes.template: ${err.message}`);
      throw err;
    }
    const name = body.metadata?.name as string;
    await createJob(this.apis().batch, namespace, body, API_TRIES).catch((err: unknown) => {
      throw apiFailure(`creating Job ${name}`, namespace, err);
    });
    return name;
  }

  async delete(name: string): Promise<void> {
    await this.call(`deleting Job ${name}`, () =>
      this.apis().batch.deleteNamespacedJob({ name, namespace: this.namespace, propagationPolicy: 'Background' }),
    ).catch((err: unknown) => {
      if (!(err instanceof PolicyUpdateError && /\(404\)/.test(err.message))) throw err;
    });
  }

  /** Reads the Job and its pod until it ends: its result, or why it failed or was given up. */
  async follow(name: string, job: TrainInput): Promise<TrainResult> {
    const { namespace, settings } = this;
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
      const current = await this.call(`reading Job ${name}`, () =>
        this.apis().batch.readNamespacedJob({ name, namespace }),
      );
      const pods = (
        await this.call(`listing the pods of Job ${name}`, () =>
          this.apis().core.listNamespacedPod({ namespace, labelSelector: `${TRAIN_JOB_LABEL}=${name}` }),
        )
      ).items;
      const pod = newestPodOf(pods);
      startedAt ??= firstStartOf(pod);
      if (conditionOf(current, 'Complete') || conditionOf(current, 'Failed'))
        return this.finished(name, current, pod, job);
      if (startedAt === undefined && Date.now() - created > settings.pendingTimeoutSeconds * 1000) {
        const waiting = statusesOf(pod).find((s) => s.name === trainerContainerOf(pod))?.state?.waiting?.reason;
        const why = pod
          ? (waiting ?? pod.status?.conditions?.find((c) => c.status === 'False')?.reason ?? 'pending')
          : noPodCreated(name, namespace);
        throw new TrainingTimeout(
          `training Job ${name} did not start within ${settings.pendingTimeoutSeconds} s (${why}); deleted`,
        );
      }
      if (startedAt !== undefined && Date.now() - startedAt > settings.timeoutSeconds * 1000) {
        throw new TrainingTimeout(
          `training Job ${name} ran past trainer.kubernetes.timeoutSeconds (${settings.timeoutSeconds} s); deleted`,
        );
      }
      await sleep(this.pollMs, undefined, job.signal ? { signal: job.signal } : undefined).catch(() => undefined);
    }
  }

  /** A finished Job: the trainer's log is kept, then its result, or the failure of the container that failed. */
  private async finished(name: string, current: V1Job, pod: V1Pod | undefined, job: TrainInput): Promise<TrainResult> {
    const trainerName = trainerContainerOf(pod);
    const container = statusesOf(pod).find((s) => s.name === trainerName);
    const log = pod?.metadata?.name ? await this.keepLog(pod.metadata.name, trainerName, job) : '';
    if (!conditionOf(current, 'Failed')) return resultOf(name, container?.state?.terminated?.message, log);
    // The container that failed: the trainer, or a pull before it or the push after it.
    const failed = statusesOf(pod).find((s) => (s.state?.terminated?.exitCode ?? 0) !== 0) ?? container;
    const terminated = failed?.state?.terminated;
    const failedLog =
      failed && failed.name !== trainerName && pod?.metadata?.name
        ? await this.readLog(pod.metadata.name, failed.name)
        : log;
    const Failure = isTrainerRefusal(terminated?.exitCode) ? PolicySetupError : PolicyUpdateError;
    const which = failed && failed.name !== trainerName ? ` in container ${failed.name}` : '';
    const how = terminated
      ? `exit ${terminated.exitCode}${terminated.reason ? `, ${terminated.reason}` : ''}`
      : (conditionOf(current, 'Failed')?.reason ?? 'no pod ran');
    throw new Failure(
      `training Job ${name} failed${which} (${how}): ${(terminated?.message ?? failedLog).trim().slice(-800)}`,
    );
  }

  /** The trainer's log, kept beside the local trainer's logs (and uploaded where the job follows its log). */
  private async keepLog(podName: string, container: string | undefined, job: TrainInput): Promise<string> {
    const log = await this.readLog(podName, container);
    const file = trainerLogFile(this.logDir, job.outputDir);
    writeFileSync(file, log);
    await job.followLog?.(file).stop(true);
    return log;
  }

  private readLog(podName: string, container: string | undefined): Promise<string> {
    return this.call(`reading the log of pod ${podName}`, () =>
      this.apis().core.readNamespacedPodLog({
        name: podName,
        namespace: this.namespace,
        ...(container && { container }),
      }),
    ).catch(() => '');
  }
}

/** When the pod's first container started: with artifacts in S3 the pulls come first, and count as training time. */
function firstStartOf(pod: V1Pod | undefined): number | undefined {
  const state = statusesOf(pod).find((s) => s.state?.running?.startedAt || s.state?.terminated?.startedAt)?.state;
  const at = state?.running?.startedAt ?? state?.terminated?.startedAt;
  return at ? new Date(at).getTime() : undefined;
}

/** Init containers first, in the order they run. */
function statusesOf(pod: V1Pod | undefined): V1ContainerStatus[] {
  return [...(pod?.status?.initContainerStatuses ?? []), ...(pod?.status?.containerStatuses ?? [])];
}

/** The trainer container's name: the one Rein gave REIN_RESULT_FILE (an init container when the pod stages from S3). */
function trainerContainerOf(pod: V1Pod | undefined): string | undefined {
  return [...(pod?.spec?.initContainers ?? []), ...(pod?.spec?.containers ?? [])].find((c) =>
    c.env?.some((e) => e.name === RESULT_FILE_ENV),
  )?.name;
}

class TrainingTimeout extends PolicyUpdateError {}

const API_TRIES = 5;

/** A failed API call as the policy update reports it: credentials and refused Jobs are setup errors, not retried. */
function apiFailure(what: string, namespace: string, err: unknown): PolicyUpdateError {
  const status = statusOf(err);
  const message = `${what} in namespace ${namespace} failed${status ? ` (${status})` : ''}: ${messageOf(err)}`;
  if (status === 401 || status === 403)
    return new PolicySetupError(
      `${message}; check the trainer's kubeconfig and RBAC (create/get/list/delete jobs, get/list pods and pods/log)`,
    );
  // The API server refuses the Job as the template makes it: a retry would be refused again.
  if (status === 400 || status === 422) return new PolicySetupError(`${message}; fix trainer.kubernetes.template`);
  return new PolicyUpdateError(message);
}

function conditionOf(job: V1Job, type: 'Complete' | 'Failed') {
  return job.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}

/** The trainer's result: its termination message, else the last JSON line of its log. */
function resultOf(jobName: string, message: string | undefined, log: string): TrainResult {
  const candidates = [message?.trim(), ...log.trim().split('\n').reverse()].filter(
    (l): l is string => !!l && l.startsWith('{'),
  );
  for (const line of candidates) {
    try {
      const result = JSON.parse(line) as TrainResult;
      if (typeof result.batchContentHash === 'string' && typeof result.steps === 'number') return result;
    } catch {
      // not the result line
    }
  }
  throw new PolicyUpdateError(
    `training Job ${jobName} succeeded but left no result: write the trainer's JSON result to $REIN_RESULT_FILE or as the last line of its log`,
  );
}
