import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import type { PodRun } from './pod-run.js';
import { podStatus } from './pod-status.js';

/** Writes a pod's status (pods/status); each call queues one write after the run's earlier ones. */
export type WriteStatus = (run: PodRun) => Promise<void>;

/**
 * Status writes as the kubelet makes them: read the pod, put the status computed from the state
 * at that moment, and try again until it lands. A failure is logged, not thrown, unless the agent
 * is closed.
 */
export function statusReporter(core: CoreV1Api, isClosed: () => boolean): WriteStatus {
  async function putStatus(run: PodRun): Promise<void> {
    for (;;) {
      let pod: V1Pod | undefined;
      try {
        pod = await core.readNamespacedPod({ namespace: run.namespace, name: run.name });
      } catch (err) {
        if ((err as { code?: unknown }).code === 404) return;
        // The apiserver is away (restarting) or busy, or its Node authorizer has not yet seen this
        // pod bound here (403 for a while after the apiserver starts): the kubelet writes again until it lands.
        if (!isClosed() && (transient(err) || (err as { code?: unknown }).code === 403)) {
          await new Promise((resolve) => setTimeout(resolve, 200));
          continue;
        }
        throw err;
      }
      if (!pod || pod.metadata?.uid !== run.uid) return;
      pod.status = podStatus(run, pod);
      try {
        await core.replaceNamespacedPodStatus({ namespace: run.namespace, name: run.name, body: pod });
        return;
      } catch (err) {
        // Someone else (the Job controller's finalizer, the scheduler) wrote in between: read again.
        if ((err as { code?: unknown }).code === 409) continue;
        if (!isClosed() && (transient(err) || (err as { code?: unknown }).code === 403)) {
          await new Promise((resolve) => setTimeout(resolve, 200));
          continue;
        }
        throw err;
      }
    }
  }

  return (run) => {
    run.writes = run.writes
      .then(() => putStatus(run))
      .catch((err: unknown) => {
        if (!isClosed())
          console.warn(`node agent: status of pod ${run.namespace}/${run.name} not written: ${(err as Error).message}`);
      });
    return run.writes;
  };
}

/** No answer (the code is then a string such as ECONNREFUSED), throttled, or a server error. */
function transient(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code !== 'number' || code === 429 || code >= 500;
}
