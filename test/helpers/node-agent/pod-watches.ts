/** The two pod watches: the kubelet's (the pods bound to its node) and the scheduler's (pods no node has yet). */
import { ListWatch, Watch, type CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';

/** The pods bound to this node, watched with the node's credentials. */
export function watchNodePods(nodeConfig: KubeConfig, core: CoreV1Api, nodeName: string): ListWatch<V1Pod> {
  return new ListWatch<V1Pod>(
    '/api/v1/pods',
    new Watch(nodeConfig),
    () => core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}` }),
    false,
    undefined,
    `spec.nodeName=${nodeName}`,
  );
}

/** Pods bound to no node and not finished, watched as system:kube-scheduler. */
export function watchUnscheduledPods(schedulerConfig: KubeConfig, schedulerCore: CoreV1Api): ListWatch<V1Pod> {
  return new ListWatch<V1Pod>(
    '/api/v1/pods',
    new Watch(schedulerConfig),
    () =>
      schedulerCore.listPodForAllNamespaces({
        fieldSelector: 'spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed',
      }),
    false,
    undefined,
    'spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed',
  );
}

/** A watch that fails (the apiserver restarted, a network error) starts over with a new list. */
export function restartOnError(informer: ListWatch<V1Pod>, isClosed: () => boolean): void {
  informer.on('error', () => {
    if (!isClosed()) setTimeout(() => void informer.start().catch(() => undefined), 500).unref();
  });
}
