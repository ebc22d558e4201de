import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isTransient, loadKubeConfig, messageOf, newestPodOf, noPodCreated, retryAfterMs, statusOf } from '../../kubernetes/api.js';
import { BatchV1Api, CoreV1Api, type KubeConfig, makeInformer, type Informer, type ObjectCache, type V1Job, type V1Pod } from '@kubernetes/client-node';
import type { HarnessExecutor, HarnessLaunch, HarnessRun } from '../executor.js';
import { JobTemplateError } from '../../kubernetes/template.js';
import { jobNameFor, MANAGED_BY_LABEL, renderJob, templateProblems, type KubernetesHarnessSettings } from './job-template.js';

/**
 * Runs each rollout attempt as a Kubernetes Job. Two informers (list + watch, reconnecting) follow
 * every Job and pod Rein manages in the namespace; each run waits on its own Job's changes. The
 * run's timeout starts when its container starts running; time spent pending has its own limit.
 */
export interface KubernetesExecutorOptions {
  /** A ready config (tests, or callers that build one); otherwise it is loaded from the settings. */
  kubeConfig?: KubeConfig;
  /** Tries per API write before the run counts as an infrastructure failure. */
  apiTries?: number;
}

/** The container cannot start, and waiting will not change that: the spec or the image must be fixed. */
const HOPELESS_WAITING = new Set(['ErrImagePull', 'ImagePullBackOff', 'InvalidImageName', 'CreateContainerConfigError', 'CreateContainerError', 'ErrImageNeverPull']);
const LOG_TAIL_LINES = 200;

export function kubernetesExecutor(settings: KubernetesHarnessSettings, options: KubernetesExecutorOptions = {}): HarnessExecutor {
  const { namespace } = settings;
  const apiTries = options.apiTries ?? 4;
  let kubeConfig = options.kubeConfig;
  let watching: Promise<Watching> | undefined;

  const config = (): KubeConfig => (kubeConfig ??= loadKubeConfig(settings));
  let clients: { batch: BatchV1Api; core: CoreV1Api } | undefined;
  const apis = () => (clients ??= { batch: config().makeApiClient(BatchV1Api), core: config().makeApiClient(CoreV1Api) });
  // Read once: every Job of the batch comes from the template that was checked before launch.
  let template: string | undefined;
  const templateText = () => (template ??= readFileSync(settings.template, 'utf8'));

  async function deleteJob(name: string): Promise<void> {
    try {
      await apis().batch.deleteNamespacedJob({ name, namespace, propagationPolicy: 'Background' });
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
    }
  }

  /**
   * What the API server's validation and admission say of the Job this template makes, as a dry
   * run (nothing is created): a template Rein's own checks let through fails here, before any
   * rollout, in the API server's words.
   */
  async function serverProblems(text: string): Promise<string[]> {
    const job = renderJob(text, settings, { rolloutId: 'check', attempt: 1, taskId: 'check', env: {} });
    try {
      await apis().batch.createNamespacedJob({ namespace, body: job, dryRun: 'All' });
      return [];
    } catch (err) {
      const status = statusOf(err);
      if (status === 400 || status === 422) return [`harness.kubernetes.template: the API server refuses the Job this template makes (${status}): ${messageOf(err)}`];
      if (status === 403) return [`harness.kubernetes: the API server refused to create Jobs in namespace ${namespace} (403); give the credentials access (RBAC: create, get, list, watch, delete on jobs; get, list, watch on pods and pods/log)`];
      // Busy, or a Job of that name exists: the real creates will say, each for its rollout.
      return [];
    }
  }

  /** Creates the Job, retrying what a busy or restarting API server answers; null when it exists or was created. */
  async function createJob(job: V1Job): Promise<HarnessRun['problem']> {
    for (let tryNumber = 1; ; tryNumber++) {
      try {
        await apis().batch.createNamespacedJob({ namespace, body: job });
        return null;
      } catch (err) {
        const status = statusOf(err);
        if (status === 409) return null; // created by an earlier runner of this attempt: follow it
        const transient = isTransient(err);
        if (transient && tryNumber < apiTries) {
          await sleep(retryAfterMs(err) ?? 250 * 2 ** tryNumber);
          continue;
        }
        const why = `creating Job ${job.metadata?.name} in namespace ${namespace} failed${status ? ` (${status})` : ''}: ${messageOf(err)}`;
        return transient ? { failureClass: 'infrastructure', reason: why } : { failureClass: 'environment', reason: why };
      }
    }
  }

  function follow(jobName: string, launch: HarnessLaunch, watch: Watching): Promise<HarnessRun> {
    return new Promise<HarnessRun>((resolve) => {
      let startedAt: number | null = null;
      let seen = false;
      let ended = false;
      let runTimer: NodeJS.Timeout | undefined;
      const where = (pod?: V1Pod) => ({ namespace, job: jobName, ...(pod?.metadata?.name && { pod: pod.metadata.name, node: pod.spec?.nodeName }) });
      const blank: HarnessRun = { exitCode: null, killedBy: null, timedOut: false, cancelled: false, problem: null, logTail: '', seconds: 0, where: where() };

      const end = (run: Partial<HarnessRun>, pod: V1Pod | undefined, removeJob: boolean) => {
        if (ended) return;
        ended = true;
        clearTimeout(pendingTimer);
        clearTimeout(runTimer);
        watch.listeners.delete(jobName);
        launch.signal?.removeEventListener('abort', onAbort);
        void collect(pod, removeJob).then(({ logTail, finishedAt }) =>
          resolve({ ...blank, ...run, logTail, where: where(pod), seconds: startedAt === null ? 0 : ((finishedAt ?? Date.now()) - startedAt) / 1000 }),
        );
      };
      // The end of the pod's log and its termination message (the harness's output), then the Job goes if asked.
      const collect = async (seenPod: V1Pod | undefined, removeJob: boolean) => {
        let logTail = '';
        let pod = seenPod;
        // Jobs and pods come on separate watches: the Job can be Complete before the pod's
        // termination (and its message, the harness's output) reaches the pod informer.
        if (pod?.metadata?.name && !containerOf(pod, settings)?.state?.terminated) {
          pod = await apis().core.readNamespacedPod({ name: pod.metadata.name, namespace }).catch(() => pod);
        }
        const terminated = containerOf(pod, settings)?.state?.terminated;
        if (terminated?.message) writeFileSync(launch.outputFile, terminated.message);
        if (pod?.metadata?.name && (terminated || containerOf(pod, settings)?.state?.running)) {
          try {
            const log = await apis().core.readNamespacedPodLog({ name: pod.metadata.name, namespace, tailLines: LOG_TAIL_LINES, ...(settings.container && { container: settings.container }) });
            writeFileSync(path.join(launch.dir, `harness-${launch.issued.attempt}.log`), log);
            logTail = log.slice(-2000);
          } catch (err) {
            logTail = `(the pod's log could not be read: ${messageOf(err)})`;
          }
        }
        if (removeJob) await deleteJob(jobName).catch(() => undefined);
        const finishedAt = terminated?.finishedAt ? new Date(terminated.finishedAt).getTime() : undefined;
        return { logTail, finishedAt };
      };
      // Handed back, the Job runs on: the next runner follows it (resume) instead of starting over.
      const onAbort = () => end({ cancelled: true }, newestPod(watch.pods, jobName, namespace), launch.handedBack?.() !== true);

      const pendingTimer = setTimeout(() => {
        const pod = newestPod(watch.pods, jobName, namespace);
        const scheduled = pod?.status?.conditions?.find((c) => c.type === 'PodScheduled');
        const why = !pod ? noPodCreated(jobName, namespace) : scheduled?.status === 'False' ? `${scheduled.reason}: ${scheduled.message ?? ''}` : (containerOf(pod, settings)?.state?.waiting?.reason ?? pod.status?.phase ?? 'Pending');
        end({ problem: { failureClass: 'infrastructure', reason: `the harness pod did not start within ${settings.pendingTimeoutSeconds} s (${why})` } }, pod, true);
      }, settings.pendingTimeoutSeconds * 1000);

      const evaluate = (deleted: boolean) => {
        if (ended) return;
        const job = watch.jobs.get(jobName, namespace);
        const pod = newestPod(watch.pods, jobName, namespace);
        if (deleted || (!job && seen)) {
          return end({ problem: { failureClass: 'infrastructure', reason: `Job ${jobName} was deleted while its rollout ran (not by Rein)` } }, pod, false);
        }
        if (!job) return; // created, not yet seen by the informer
        seen = true;
        const container = containerOf(pod, settings);
        const running = container?.state?.running ?? (container?.state?.terminated && { startedAt: container.state.terminated.startedAt });
        if (running && startedAt === null) {
          startedAt = running.startedAt ? new Date(running.startedAt).getTime() : Date.now();
          clearTimeout(pendingTimer);
          runTimer = setTimeout(() => end({ timedOut: true, killedBy: 'SIGTERM' }, newestPod(watch.pods, jobName, namespace), true), Math.max(0, settings.timeoutSeconds * 1000 - (Date.now() - startedAt)));
        }
        const waiting = container?.state?.waiting;
        if (waiting?.reason && HOPELESS_WAITING.has(waiting.reason)) {
          return end({ problem: { failureClass: 'environment', reason: `the harness container cannot start: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}` } }, pod, true);
        }
        const condition = (type: string) => job.status?.conditions?.find((c) => c.type === type && c.status === 'True');
        if (condition('Complete')) return end({ exitCode: 0 }, pod, false);
        const failed = condition('Failed');
        if (!failed) return;
        if (failed.reason === 'DeadlineExceeded') return end({ timedOut: true, killedBy: 'SIGTERM' }, pod, false);
        const terminated = container?.state?.terminated;
        if (pod?.status?.reason === 'Evicted' || !terminated) {
          const why = pod?.status?.reason ? `${pod.status.reason}: ${pod.status.message ?? ''}` : `${failed.reason}: ${failed.message ?? ''}`;
          return end({ problem: { failureClass: 'infrastructure', reason: `the harness pod was lost (${why.trim()})` } }, pod, false);
        }
        return end({ exitCode: terminated.exitCode, killedBy: terminated.signal ? `signal ${terminated.signal}` : terminated.reason === 'OOMKilled' ? 'OOMKilled' : null }, pod, false);
      };

      watch.listeners.set(jobName, evaluate);
      launch.signal?.addEventListener('abort', onAbort, { once: true });
      if (launch.signal?.aborted) onAbort();
      evaluate(false);
    });
  }

  const startWatching = async (): Promise<Watching> => {
    const { batch, core } = apis();
    const selector = `${MANAGED_BY_LABEL}=rein`;
    const jobs = makeInformer<V1Job>(config(), `/apis/batch/v1/namespaces/${namespace}/jobs`, () => batch.listNamespacedJob({ namespace, labelSelector: selector }), selector);
    const pods = makeInformer<V1Pod>(config(), `/api/v1/namespaces/${namespace}/pods`, () => core.listNamespacedPod({ namespace, labelSelector: selector }), selector);
    const watching: Watching = { jobs, pods, listeners: new Map(), stopped: false };
    const notify = (name: string | undefined, deleted = false) => name && watching.listeners.get(name)?.(deleted);
    jobs.on('change', (job) => notify(job.metadata?.name));
    jobs.on('delete', (job) => notify(job.metadata?.name, true));
    for (const verb of ['change', 'delete'] as const) pods.on(verb, (pod) => notify(pod.metadata?.labels?.['job-name']));
    // An informer stops on an error (the API server went away); it starts over, listing again, a moment later.
    for (const informer of [jobs, pods] as Array<Informer<V1Job | V1Pod>>) {
      informer.on('error', () => {
        if (!watching.stopped) setTimeout(() => void informer.start().catch(() => undefined), 1000).unref();
      });
    }
    await Promise.all([jobs.start(), pods.start()]);
    return watching;
  };
  const watched = () => (watching ??= startWatching().catch((err: unknown) => {
    watching = undefined;
    throw err;
  }));

  return {
    async problems() {
      let text: string;
      try {
        text = templateText();
      } catch (err) {
        return [`harness.kubernetes.template: ${settings.template} cannot be read (${(err as NodeJS.ErrnoException).code}); give the path of a Job manifest`];
      }
      const problems = templateProblems(text, settings);
      try {
        await apis().batch.listNamespacedJob({ namespace, limit: 1 });
      } catch (err) {
        const status = statusOf(err);
        if (status === 401 || status === 403) {
          problems.push(`harness.kubernetes: the API server refused to list Jobs in namespace ${namespace} (${status}); give the credentials access (RBAC: create, get, list, watch, delete on jobs; get, list, watch on pods and pods/log)`);
        } else if (status === undefined && err instanceof Error && /kubeconfig|context|cluster/i.test(err.message)) {
          problems.push(`harness.kubernetes: no usable Kubernetes config: ${err.message}`);
        } else {
          throw err;
        }
      }
      if (problems.length === 0) problems.push(...(await serverProblems(text)));
      return problems;
    },

    async run(launch) {
      const { issued } = launch;
      let job: V1Job;
      try {
        job = renderJob(templateText(), settings, { rolloutId: issued.rollout.id, attempt: issued.attempt, taskId: issued.rollout.taskId ?? '', env: harnessEnv(launch) });
      } catch (err) {
        if (!(err instanceof JobTemplateError)) throw err;
        return lostRun({ failureClass: 'environment', reason: err.message }, namespace);
      }
      const watch = await watched();
      const problem = await createJob(job);
      if (problem) return lostRun(problem, namespace);
      return follow(job.metadata?.name as string, launch, watch);
    },

    async resume(launch) {
      const name = jobNameFor(launch.issued.rollout.id, launch.issued.attempt);
      try {
        await apis().batch.readNamespacedJob({ name, namespace });
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
      return follow(name, launch, await watched());
    },

    async close() {
      const current = await watching?.catch(() => undefined);
      if (!current) return;
      current.stopped = true;
      await Promise.all([current.jobs.stop(), current.pods.stop()]);
    },
  };
}

interface Watching {
  jobs: Informer<V1Job> & ObjectCache<V1Job>;
  pods: Informer<V1Pod> & ObjectCache<V1Pod>;
  /** Per Job name: re-reads the Job's state (true when it was deleted). */
  listeners: Map<string, (deleted: boolean) => void>;
  stopped: boolean;
}

/** What the harness container gets from Rein: its credentials, the task, and who it is. */
function harnessEnv(launch: HarnessLaunch): Record<string, string> {
  return {
    ...launch.env,
    OPENAI_BASE_URL: launch.issued.baseUrl,
    OPENAI_API_KEY: launch.issued.key,
    REIN_ROLLOUT_ID: launch.issued.rollout.id,
    REIN_ATTEMPT: String(launch.issued.attempt),
    ...(launch.issued.traceparent && { TRACEPARENT: launch.issued.traceparent }),
    REIN_TASK: JSON.stringify(launch.task),
  };
}

function lostRun(problem: NonNullable<HarnessRun['problem']>, namespace: string): HarnessRun {
  return { exitCode: null, killedBy: null, timedOut: false, cancelled: false, problem, logTail: '', seconds: 0, where: { namespace } };
}

function newestPod(pods: ObjectCache<V1Pod>, jobName: string, namespace: string): V1Pod | undefined {
  return newestPodOf(pods.list(namespace).filter((p) => p.metadata?.labels?.['job-name'] === jobName));
}

function containerOf(pod: V1Pod | undefined, settings: KubernetesHarnessSettings) {
  const statuses = pod?.status?.containerStatuses ?? [];
  return settings.container === undefined ? statuses[0] : statuses.find((s) => s.name === settings.container);
}

