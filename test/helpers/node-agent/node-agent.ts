/**
 * The node agent: the one stand-in in Rein's Kubernetes tests, for the kubelet (and the
 * scheduler) that have no offline substitute. Everything else is the real control plane
 * (test/helpers/kube-control-plane.ts). It talks to the apiserver only through the API, as the
 * kubelet does (a client certificate for system:node:<name> in system:nodes, under the Node
 * authorizer and NodeRestriction), and binds pods as system:kube-scheduler.
 *
 * What it does for real, through the API:
 * - registers its Node (Ready, capacity, InternalIP 127.0.0.1, its kubelet port) and renews the
 *   node's Lease, so the node lifecycle controller keeps it Ready;
 * - binds each pending pod to itself (pods/binding) while fewer than `maxPods` of its pods are
 *   active; the rest get PodScheduled=False, reason Unschedulable ("Too many pods"), as the
 *   scheduler reports them. setMaxPods(0) keeps every new pod Pending;
 * - runs the pods bound to it and reports their status (pods/status): phase, conditions,
 *   container states with exit codes (a signal's death is 128 + its number) and termination
 *   messages (terminationMessagePath, FallbackToLogsOnError), restarts under OnFailure/Always;
 * - runs init containers one after another before the others (the pod Pending, Initialized
 *   False, until the last succeeds; one that fails under restartPolicy Never fails the pod);
 * - serves container logs on its kubelet port for the apiserver's pods/log proxy;
 * - on a pod's graceful deletion sends SIGTERM, SIGKILL after the grace period, reports the end and
 *   deletes the pod for good (grace 0, as the kubelet does); evictPod does what the kubelet does
 *   under node pressure (kill, phase Failed, reason Evicted, DisruptionTarget).
 *
 * What it fakes (see container-command.ts): a container is a local process made from an image
 * map (image → entrypoint, cmd, env, working dir); an image not in the map is ErrImagePull. An
 * emptyDir is a folder of the pod's that its mount paths in arguments and env map to; other
 * volumes are this machine's disk. No isolation, resource limits, probes, sidecar containers, restart back-off,
 * image pull back-off, events, exec/attach/port-forward; scheduling ignores requests, selectors,
 * taints and affinity (one node, capacity counted in pods only).
 *
 * The pieces: node-registration.ts (the Node and its Lease), pod-watches.ts (the node's and the
 * scheduler's pod watches), pod-scheduler.ts (binding), pod-runner.ts (running and stopping pods),
 * pod-status.ts and status-reporter.ts (computing and writing pods/status), kubelet-server.ts (logs).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import type { KubeControlPlane } from '../kube-control-plane.js';
import type { ImageSpec } from './container-command.js';
import { envSourceReaders } from './env-sources.js';
import { startKubeletServer } from './kubelet-server.js';
import { keepLeaseRenewed, registerNode } from './node-registration.js';
import { PodRunner } from './pod-runner.js';
import { PodScheduler } from './pod-scheduler.js';
import { restartOnError, watchNodePods, watchUnscheduledPods } from './pod-watches.js';
import { statusReporter } from './status-reporter.js';

export type { ImageSpec } from './container-command.js';

export interface NodeAgentOptions {
  /** The image map: what each image runs. Any other image is ErrImagePull. */
  images: Record<string, ImageSpec>;
  /** The Node's name. Default 'rein-node'. */
  name?: string;
  /**
   * Pods the node takes at once (active ones: not Succeeded or Failed); more stay Pending, Unschedulable. Default 110,
   * the kubelet's.
   */
  maxPods?: number;
  /**
   * Capacity the Node reports besides pods (e.g. { 'nvidia.com/gpu': '1' }); default cpu 16, memory 64Gi. Reported, not
   * enforced.
   */
  capacity?: Record<string, string>;
}

export interface NodeAgent {
  nodeName: string;
  /** Changes how many pods the node takes at once; 0 keeps every new pod Pending (Unschedulable). */
  setMaxPods(n: number): void;
  /** Evicts a running pod as the kubelet does under node pressure; resolves once its status says so. */
  evictPod(namespace: string, name: string, message?: string): Promise<void>;
  /** Pods with a container process running now. */
  runningPods(): number;
  /** Stops serving and kills every container; the Node object stays (as after a kubelet stops). */
  close(): Promise<void>;
}

const EVICTION_MESSAGE = 'The node was low on resource: memory. ';

export async function startNodeAgent(plane: KubeControlPlane, options: NodeAgentOptions): Promise<NodeAgent> {
  const nodeName = options.name ?? 'rein-node';
  const maxPods = options.maxPods ?? 110;
  const nodeConfig = plane.kubeConfigFor(`system:node:${nodeName}`, ['system:nodes']);
  const core = nodeConfig.makeApiClient(CoreV1Api);
  const schedulerConfig = plane.kubeConfigFor('system:kube-scheduler');
  const schedulerCore = schedulerConfig.makeApiClient(CoreV1Api);
  const dir = mkdtempSync(path.join(os.tmpdir(), `rein-node-${nodeName}-`));
  let closed = false;
  const isClosed = () => closed;

  const nodePods = watchNodePods(nodeConfig, core, nodeName);
  const unscheduled = watchUnscheduledPods(schedulerConfig, schedulerCore);
  const runner: PodRunner = new PodRunner({
    nodeName,
    dir,
    images: options.images,
    core,
    envSources: envSourceReaders(core),
    writeStatus: statusReporter(core, isClosed),
    podEnded: (uid) => scheduler.podEnded(uid),
    isClosed,
  });
  const scheduler = new PodScheduler({
    core: schedulerCore,
    nodeName,
    maxPods,
    nodePods,
    unscheduled,
    phaseOf: (pod) => runner.phaseOf(pod),
    isClosed,
  });

  const servingCert = plane.ca.issue(`kubelet-${nodeName}`, {
    commonName: `system:node:${nodeName}`,
    organizations: ['system:nodes'],
    dnsNames: [nodeName],
    ips: ['127.0.0.1'],
  });
  const kubelet = await startKubeletServer(
    { cert: servingCert.cert, key: servingCert.key, ca: plane.ca.cert },
    { runs: runner.containerRuns },
  );
  await registerNode(core, nodeName, kubelet.port, maxPods, options.capacity ?? {});
  const stopLease = await keepLeaseRenewed(nodeConfig, nodeName);

  const syncNodePod = (pod: V1Pod) => {
    if (closed || pod.spec?.nodeName !== nodeName) return;
    runner.sync(pod);
    scheduler.seen(pod.metadata?.uid as string);
  };
  nodePods.on('add', syncNodePod);
  nodePods.on('update', syncNodePod);
  nodePods.on('delete', (pod) => runner.gone(pod));
  unscheduled.on('add', (pod) => void scheduler.schedule(pod));
  unscheduled.on('update', (pod) => void scheduler.schedule(pod));
  restartOnError(nodePods, isClosed);
  restartOnError(unscheduled, isClosed);
  await nodePods.start();
  await unscheduled.start();

  return {
    nodeName,
    setMaxPods: (n) => scheduler.setMaxPods(n),
    evictPod: (namespace, name, message = EVICTION_MESSAGE) => runner.evict(namespace, name, message),
    runningPods: () => runner.runningPods(),
    async close() {
      if (closed) return;
      closed = true;
      stopLease();
      await nodePods.stop();
      await unscheduled.stop();
      await runner.stopAll();
      await kubelet.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
