import { makeInformer, type Informer, type ObjectCache, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { newestPodOf } from '../../kubernetes/api.js';
import { MANAGED_BY_LABEL } from '../../kubernetes/job-overlay.js';
import type { HarnessCluster } from './cluster.js';

/**
 * Two informers (list + watch, reconnecting) that follow every Job and pod Rein manages in the
 * namespace; each run registers a listener for its own Job's changes.
 */
export interface Watching {
  jobs: Informer<V1Job> & ObjectCache<V1Job>;
  pods: Informer<V1Pod> & ObjectCache<V1Pod>;
  /** Per Job name: re-reads the Job's state (true when it was deleted). */
  listeners: Map<string, (deleted: boolean) => void>;
  stopped: boolean;
}

export async function startWatching(cluster: HarnessCluster): Promise<Watching> {
  const { batch, core } = cluster.apis();
  const { namespace } = cluster;
  const selector = `${MANAGED_BY_LABEL}=rein`;
  const jobs = makeInformer<V1Job>(
    cluster.config(),
    `/apis/batch/v1/namespaces/${namespace}/jobs`,
    () => batch.listNamespacedJob({ namespace, labelSelector: selector }),
    selector,
  );
  const pods = makeInformer<V1Pod>(
    cluster.config(),
    `/api/v1/namespaces/${namespace}/pods`,
    () => core.listNamespacedPod({ namespace, labelSelector: selector }),
    selector,
  );
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
}

export async function stopWatching(watching: Watching): Promise<void> {
  watching.stopped = true;
  await Promise.all([watching.jobs.stop(), watching.pods.stop()]);
}

export function newestPod(pods: ObjectCache<V1Pod>, jobName: string, namespace: string): V1Pod | undefined {
  return newestPodOf(pods.list(namespace).filter((p) => p.metadata?.labels?.['job-name'] === jobName));
}
