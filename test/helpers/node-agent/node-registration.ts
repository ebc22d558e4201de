/** The node's own objects, as the kubelet keeps them: its Node (registered Ready) and its Lease. */
import os from 'node:os';
import {
  CoordinationV1Api,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
  type CoreV1Api,
  type KubeConfig,
  type V1Node,
} from '@kubernetes/client-node';

const LEASE_SECONDS = 40;

export async function registerNode(
  core: CoreV1Api,
  name: string,
  kubeletPort: number,
  maxPods: number,
  extra: Record<string, string>,
): Promise<void> {
  const capacity = {
    cpu: '16',
    memory: '64Gi',
    'ephemeral-storage': '100Gi',
    pods: String(Math.max(maxPods, 110)),
    ...extra,
  };
  const node: V1Node = {
    metadata: {
      name,
      labels: {
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': os.arch() === 'arm64' ? 'arm64' : 'amd64',
      },
    },
    spec: {},
  };
  await core.createNode({ body: node }).catch((err: unknown) => {
    // A node agent restarted under the same name finds its Node, as a kubelet does.
    if ((err as { code?: number }).code !== 409) throw err;
  });
  const now = new Date();
  const condition = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    reason,
    message,
    lastHeartbeatTime: now,
    lastTransitionTime: now,
  });
  const status: V1Node['status'] = {
    capacity,
    allocatable: capacity,
    conditions: [
      condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
      condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
      condition('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
      condition('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status'),
    ],
    addresses: [
      { type: 'InternalIP', address: '127.0.0.1' },
      { type: 'Hostname', address: name },
    ],
    daemonEndpoints: { kubeletEndpoint: { Port: kubeletPort } },
    nodeInfo: {
      machineID: name,
      systemUUID: name,
      bootID: name,
      kernelVersion: os.release(),
      osImage: 'Rein node agent (test stand-in for a kubelet)',
      containerRuntimeVersion: 'rein-node-agent://1',
      kubeletVersion: 'v1.34.4',
      kubeProxyVersion: '',
      operatingSystem: 'linux',
      architecture: os.arch() === 'arm64' ? 'arm64' : 'amd64',
    },
  };
  // A merge patch of the status alone, as the kubelet patches it: a replace would carry the Node's
  // spec as read, and a taint the controllers add meanwhile would make it a taint change, which
  // NodeRestriction forbids a node (403) before the conflict (409) is seen.
  await core.patchNodeStatus({ name, body: { status } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
}

/**
 * Renews the node's Lease now and every 10 s, so the node lifecycle controller keeps it Ready; returns what stops it.
 */
export async function keepLeaseRenewed(nodeConfig: KubeConfig, name: string): Promise<() => void> {
  const leases = nodeConfig.makeApiClient(CoordinationV1Api);
  await renewLease(leases, name);
  const timer = setInterval(() => void renewLease(leases, name).catch(() => undefined), 10_000);
  timer.unref();
  return () => clearInterval(timer);
}

async function renewLease(leases: CoordinationV1Api, name: string): Promise<void> {
  const namespace = 'kube-node-lease';
  // renewTime is a MicroTime: six digits of fractions, which a plain Date does not write.
  const spec = { holderIdentity: name, leaseDurationSeconds: LEASE_SECONDS, renewTime: new V1MicroTime() };
  const lease = await leases.readNamespacedLease({ namespace, name }).catch(() => undefined);
  if (lease)
    await leases.replaceNamespacedLease({ namespace, name, body: { ...lease, spec: { ...lease.spec, ...spec } } });
  else await leases.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec } });
}
