import type { KubeConfig, V1Job } from '@kubernetes/client-node';
import { isTransient, messageOf, statusOf } from '../../kubernetes/api.js';
import { createJob } from '../../kubernetes/api-retry.js';
import { JobTemplateError } from '../../kubernetes/template.js';
import { modelEndpointEnv, type HarnessExecutor, type HarnessLaunch, type HarnessRun } from '../executor.js';
import { harnessCluster, type HarnessCluster } from './cluster.js';
import { executorProblems } from './executor-checks.js';
import { followJob } from './job-run.js';
import { jobNameFor, renderJob, type KubernetesHarnessSettings } from './job-template.js';
import { startWatching, stopWatching, type Watching } from './job-watch.js';

/**
 * Runs each rollout attempt as a Kubernetes Job. Two informers (list + watch, reconnecting) follow
 * every Job and pod Rein manages in the namespace (job-watch.ts); each run waits on its own Job's
 * changes (job-run.ts). The run's timeout starts when its container starts running; time spent
 * pending has its own limit.
 */
export interface KubernetesExecutorOptions {
  /** A ready config (tests, or callers that build one); otherwise it is loaded from the settings. */
  kubeConfig?: KubeConfig;
  /** Tries per API write before the run counts as an infrastructure failure. */
  apiTries?: number;
}

export function kubernetesExecutor(
  settings: KubernetesHarnessSettings,
  options: KubernetesExecutorOptions = {},
): HarnessExecutor {
  const cluster = harnessCluster(settings, options);
  const { namespace } = cluster;
  let watching: Promise<Watching> | undefined;
  const watched = () =>
    (watching ??= startWatching(cluster).catch((err: unknown) => {
      watching = undefined;
      throw err;
    }));

  return {
    problems: () => executorProblems(cluster),

    async run(launch) {
      const { issued } = launch;
      let job: V1Job;
      try {
        job = renderJob(cluster.templateText(), settings, {
          rolloutId: issued.rollout.id,
          attempt: issued.attempt,
          taskId: issued.rollout.taskId ?? '',
          env: harnessEnv(launch),
        });
      } catch (err) {
        if (!(err instanceof JobTemplateError)) throw err;
        return lostRun({ failureClass: 'environment', reason: err.message }, namespace);
      }
      const watch = await watched();
      const problem = await createHarnessJob(cluster, job);
      if (problem) return lostRun(problem, namespace);
      return followJob(cluster, job.metadata?.name as string, launch, watch);
    },

    async resume(launch) {
      const name = jobNameFor(launch.issued.rollout.id, launch.issued.attempt);
      try {
        await cluster.apis().batch.readNamespacedJob({ name, namespace });
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
      return followJob(cluster, name, launch, await watched());
    },

    async close() {
      const current = await watching?.catch(() => undefined);
      if (current) await stopWatching(current);
    },
  };
}

/** Creates the Job (one an earlier runner of this attempt created is followed); null when it is there, else why not. */
async function createHarnessJob(cluster: HarnessCluster, job: V1Job): Promise<HarnessRun['problem']> {
  try {
    await createJob(cluster.apis().batch, cluster.namespace, job, cluster.apiTries);
    return null;
  } catch (err) {
    const status = statusOf(err);
    const why = `creating Job ${job.metadata?.name} in namespace ${cluster.namespace} failed${status ? ` (${status})` : ''}: ${messageOf(err)}`;
    return { failureClass: isTransient(err) ? 'infrastructure' : 'environment', reason: why };
  }
}

/** What the harness container gets from Rein: its credentials, the task, and who it is. */
function harnessEnv(launch: HarnessLaunch): Record<string, string> {
  return {
    ...launch.env,
    ...modelEndpointEnv(launch.issued),
    REIN_ROLLOUT_ID: launch.issued.rollout.id,
    REIN_ATTEMPT: String(launch.issued.attempt),
    ...(launch.issued.traceparent && { TRACEPARENT: launch.issued.traceparent }),
    REIN_TASK: JSON.stringify(launch.task),
  };
}

function lostRun(problem: NonNullable<HarnessRun['problem']>, namespace: string): HarnessRun {
  return {
    exitCode: null,
    killedBy: null,
    timedOut: false,
    cancelled: false,
    problem,
    logTail: '',
    seconds: 0,
    where: { namespace },
  };
}
