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
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  CoordinationV1Api,
  CoreV1Api,
  ListWatch,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
  Watch,
  type V1Container,
  type V1ContainerStatus,
  type V1Node,
  type V1Pod,
  type V1PodCondition,
} from '@kubernetes/client-node';
import type { KubeControlPlane } from '../kube-control-plane.js';
import { containerCommand, ContainerStartError, type ImageSpec, type PodVolumes, type ReadAll, type ReadKey } from './container-command.js';
import { ContainerProcess, terminationMessage } from './container-process.js';
import { startKubeletServer, type KubeletServer } from './kubelet-server.js';

export type { ImageSpec } from './container-command.js';

export interface NodeAgentOptions {
  /** The image map: what each image runs. Any other image is ErrImagePull. */
  images: Record<string, ImageSpec>;
  /** The Node's name. Default 'rein-node'. */
  name?: string;
  /** Pods the node takes at once (active ones: not Succeeded or Failed); more stay Pending, Unschedulable. Default 110, the kubelet's. */
  maxPods?: number;
  /** Capacity the Node reports besides pods (e.g. { 'nvidia.com/gpu': '1' }); default cpu 16, memory 64Gi. Reported, not enforced. */
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

interface ContainerSlot {
  spec: V1Container;
  messageFile: string;
  waiting?: { reason: string; message?: string };
  current?: ContainerProcess;
  previous?: ContainerProcess;
  /** The current run's termination message, once it has ended. */
  message?: string;
  restartCount: number;
}

interface PodRun {
  uid: string;
  namespace: string;
  name: string;
  pod: V1Pod;
  startTime: Date;
  /** Init containers, in order; they run one at a time before `slots`. */
  initSlots: ContainerSlot[];
  slots: Map<string, ContainerSlot>;
  volumes: PodVolumes;
  stopping: boolean;
  /** Its deletion is being finished (stop, report, delete for good). */
  deleting?: boolean;
  evicted?: string;
  /** Status writes, one after another, each from the state at the time it runs. */
  writes: Promise<void>;
}

const ACTIVE = (pod: V1Pod) => pod.status?.phase !== 'Succeeded' && pod.status?.phase !== 'Failed';
const TERMINAL_POD_REASON = 'PodCompleted';
const EVICTION_MESSAGE = 'The node was low on resource: memory. ';
const LEASE_SECONDS = 40;

export async function startNodeAgent(plane: KubeControlPlane, options: NodeAgentOptions): Promise<NodeAgent> {
  const nodeName = options.name ?? 'rein-node';
  let maxPods = options.maxPods ?? 110;
  const nodeConfig = plane.kubeConfigFor(`system:node:${nodeName}`, ['system:nodes']);
  const core = nodeConfig.makeApiClient(CoreV1Api);
  const schedulerConfig = plane.kubeConfigFor('system:kube-scheduler');
  const schedulerCore = schedulerConfig.makeApiClient(CoreV1Api);
  const dir = mkdtempSync(path.join(os.tmpdir(), `rein-node-${nodeName}-`));
  const runs = new Map<string, PodRun>();
  /** Pods bound here that the node's watch has not shown yet: the scheduler's "assumed" pods. */
  const justBound = new Set<string>();
  let closed = false;

  const servingCert = plane.ca.issue(`kubelet-${nodeName}`, { commonName: `system:node:${nodeName}`, organizations: ['system:nodes'], dnsNames: [nodeName], ips: ['127.0.0.1'] });
  const kubelet: KubeletServer = await startKubeletServer({ cert: servingCert.cert, key: servingCert.key, ca: plane.ca.cert }, {
    runs(namespace, name, container) {
      const run = [...runs.values()].reverse().find((r) => r.namespace === namespace && r.name === name);
      const slot = run?.slots.get(container) ?? run?.initSlots.find((s) => s.spec.name === container);
      if (!slot) return undefined;
      return { ...(slot.current && { current: slot.current }), ...(slot.previous && { previous: slot.previous }), ...(slot.waiting && { waiting: slot.waiting.reason }) };
    },
  });

  await registerNode(core, nodeName, kubelet.port, maxPods, options.capacity ?? {});
  const leases = nodeConfig.makeApiClient(CoordinationV1Api);
  await renewLease(leases, nodeName);
  const leaseTimer = setInterval(() => void renewLease(leases, nodeName).catch(() => undefined), 10_000);
  leaseTimer.unref();

  const readKey: ReadKey = async (kind, namespace, name, key) => {
    const object = kind === 'secret' ? await core.readNamespacedSecret({ namespace, name }).catch(() => undefined) : await core.readNamespacedConfigMap({ namespace, name }).catch(() => undefined);
    const data = object && 'binaryData' in object ? { ...object.data } : object?.data;
    const value = data?.[key];
    return value === undefined ? undefined : kind === 'secret' ? Buffer.from(value, 'base64').toString('utf8') : value;
  };
  const readAll: ReadAll = async (kind, namespace, name) => {
    const object = kind === 'secret' ? await core.readNamespacedSecret({ namespace, name }).catch(() => undefined) : await core.readNamespacedConfigMap({ namespace, name }).catch(() => undefined);
    if (!object) return undefined;
    return Object.fromEntries(Object.entries(object.data ?? {}).map(([key, value]) => [key, kind === 'secret' ? Buffer.from(value, 'base64').toString('utf8') : value]));
  };

  // --- Status --------------------------------------------------------------------------------

  const writeStatus = (run: PodRun): Promise<void> => {
    run.writes = run.writes.then(() => putStatus(run)).catch((err: unknown) => {
      if (!closed) console.warn(`node agent: status of pod ${run.namespace}/${run.name} not written: ${(err as Error).message}`);
    });
    return run.writes;
  };

  async function putStatus(run: PodRun): Promise<void> {
    for (;;) {
      let pod: V1Pod | undefined;
      try {
        pod = await core.readNamespacedPod({ namespace: run.namespace, name: run.name });
      } catch (err) {
        if ((err as { code?: unknown }).code === 404) return;
        // The apiserver is away (restarting) or busy, or its Node authorizer has not yet seen this
        // pod bound here (403 for a while after the apiserver starts): the kubelet writes again until it lands.
        if (!closed && (transient(err) || (err as { code?: unknown }).code === 403)) {
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
        if (!closed && (transient(err) || (err as { code?: unknown }).code === 403)) {
          await new Promise((resolve) => setTimeout(resolve, 200));
          continue;
        }
        throw err;
      }
    }
  }

  // --- Running pods --------------------------------------------------------------------------

  async function startPod(pod: V1Pod): Promise<void> {
    const uid = pod.metadata?.uid as string;
    const podDir = path.join(dir, uid);
    mkdirSync(podDir, { recursive: true });
    const emptyDirs: Record<string, string> = {};
    for (const volume of pod.spec?.volumes ?? []) {
      if (!volume.emptyDir) continue;
      emptyDirs[volume.name] = path.join(podDir, 'volumes', volume.name);
      mkdirSync(emptyDirs[volume.name] as string, { recursive: true });
    }
    const initializing = (pod.spec?.initContainers?.length ?? 0) > 0;
    const slot = (c: V1Container): ContainerSlot => ({ spec: c, messageFile: path.join(podDir, `${c.name}.termination-log`), waiting: { reason: initializing ? 'PodInitializing' : 'ContainerCreating' }, restartCount: 0 });
    const run: PodRun = {
      uid,
      namespace: pod.metadata?.namespace as string,
      name: pod.metadata?.name as string,
      pod,
      startTime: new Date(),
      initSlots: (pod.spec?.initContainers ?? []).map(slot),
      slots: new Map((pod.spec?.containers ?? []).map((c) => [c.name, slot(c)])),
      volumes: { emptyDirs },
      stopping: false,
      writes: Promise.resolve(),
    };
    runs.set(uid, run);
    void writeStatus(run);
    if (!(await initialize(run))) return;
    await Promise.all([...run.slots.values()].map(async (slot) => {
      const process = await startContainer(run, slot);
      if (process) void process.done.then(() => containerEnded(run, slot, process));
    }));
    await writeStatus(run);
  }

  /** Runs the init containers in order; true once the last has succeeded. */
  async function initialize(run: PodRun): Promise<boolean> {
    for (const slot of run.initSlots) {
      for (;;) {
        const process = await startContainer(run, slot);
        await writeStatus(run);
        if (!process) return false; // it cannot start: it waits, as the kubelet's does, until the pod goes
        await process.done;
        slot.message = terminationMessage(process, slot.messageFile, slot.spec.terminationMessagePolicy);
        await writeStatus(run);
        if (run.stopping || closed) return false;
        if (process.exit?.exitCode === 0) break;
        if ((run.pod.spec?.restartPolicy ?? 'Always') === 'Never') {
          podEnded(run.uid);
          return false;
        }
        slot.restartCount += 1;
      }
    }
    return true;
  }

  async function startContainer(run: PodRun, slot: ContainerSlot): Promise<ContainerProcess | undefined> {
    let command;
    try {
      command = await containerCommand(run.pod, slot.spec, options.images, slot.messageFile, { readKey, readAll }, run.volumes);
    } catch (err) {
      if (!(err instanceof ContainerStartError)) throw err;
      slot.waiting = { reason: err.reason, message: err.message };
      return undefined;
    }
    if (run.stopping) return undefined;
    rmSync(slot.messageFile, { force: true });
    const process = new ContainerProcess(command.argv, command.env, command.cwd);
    slot.previous = slot.current;
    slot.current = process;
    slot.waiting = undefined;
    slot.message = undefined;
    return process;
  }

  async function containerEnded(run: PodRun, slot: ContainerSlot, process: ContainerProcess): Promise<void> {
    slot.message = terminationMessage(process, slot.messageFile, slot.spec.terminationMessagePolicy);
    const policy = run.pod.spec?.restartPolicy ?? 'Always';
    const restart = !run.stopping && !closed && (policy === 'Always' || (policy === 'OnFailure' && process.exit?.exitCode !== 0));
    if (restart) {
      slot.restartCount += 1;
      const next = await startContainer(run, slot);
      if (next) void next.done.then(() => containerEnded(run, slot, next));
    }
    await writeStatus(run);
    if (podPhase(run) === 'Succeeded' || podPhase(run) === 'Failed') podEnded(run.uid);
  }

  /** A pod of this node is gone or done: it no longer counts against maxPods. */
  function podEnded(uid: string): void {
    justBound.delete(uid);
    scheduleAll();
  }

  /**
   * The pods that count against maxPods, counted afresh from what the node runs and has bound, not
   * kept as a tally (a tally leaked when a fast pod ended before its binding call returned).
   */
  function activePods(): number {
    const active = new Set([...binding, ...justBound]);
    for (const pod of mine.list()) {
      const uid = pod.metadata?.uid as string;
      const run = runs.get(uid);
      const phase = run ? podPhase(run) : pod.status?.phase;
      if (phase !== 'Succeeded' && phase !== 'Failed') active.add(uid);
    }
    return active.size;
  }

  async function stopPod(run: PodRun, graceSeconds: number): Promise<void> {
    run.stopping = true;
    const processes = allSlots(run).flatMap((s) => (s.current && !s.current.exit ? [s.current] : []));
    for (const p of processes) p.kill('SIGTERM');
    const killer = setTimeout(() => processes.forEach((p) => p.kill('SIGKILL')), graceSeconds * 1000);
    await Promise.all(processes.map((p) => p.done));
    clearTimeout(killer);
  }

  /** The kubelet's part of a graceful deletion: stop the containers, report, then delete for good. */
  async function finishDeletion(pod: V1Pod): Promise<void> {
    const run = runs.get(pod.metadata?.uid as string);
    if (run) {
      if (run.deleting) return; // an earlier event of this deletion does it
      run.deleting = true;
      // Also when it is stopping already (evicted): the pod goes once its processes have ended.
      await stopPod(run, pod.metadata?.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30);
      await writeStatus(run);
    }
    // Grace 0 with the pod's UID as precondition, as the kubelet's status manager deletes. Both in
    // the body: with a body the apiserver reads no query parameters, so a gracePeriodSeconds=0
    // query beside a body of preconditions is ignored and the pod stays, still terminating.
    await core
      .deleteNamespacedPod({ namespace: pod.metadata?.namespace as string, name: pod.metadata?.name as string, body: { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata?.uid as string } } })
      .catch((err: unknown) => {
        const code = (err as { code?: number }).code;
        // 404: gone already; 409: a new pod of the same name (the precondition held).
        if (code !== 404 && code !== 409 && !closed) console.warn(`node agent: pod ${pod.metadata?.namespace}/${pod.metadata?.name} not deleted: ${(err as Error).message}`);
      });
  }

  function podGone(pod: V1Pod): void {
    const uid = pod.metadata?.uid as string;
    const run = runs.get(uid);
    if (run) {
      run.stopping = true;
      for (const slot of allSlots(run)) slot.current?.kill('SIGKILL');
      runs.delete(uid);
      void Promise.all(allSlots(run).flatMap((s) => (s.current ? [s.current.done] : []))).then(() => rmSync(path.join(dir, uid), { recursive: true, force: true }));
    }
    podEnded(uid);
  }

  const syncNodePod = (pod: V1Pod) => {
    if (closed || pod.spec?.nodeName !== nodeName) return;
    const uid = pod.metadata?.uid as string;
    const run = runs.get(uid);
    if (run) run.pod = pod;
    if (pod.metadata?.deletionTimestamp) {
      void finishDeletion(pod);
    } else if (!run && ACTIVE(pod)) {
      void startPod(pod);
    }
    justBound.delete(uid);
  };

  // --- Scheduling ----------------------------------------------------------------------------

  const binding = new Set<string>();
  async function schedule(pod: V1Pod): Promise<void> {
    const uid = pod.metadata?.uid as string;
    if (closed || pod.spec?.nodeName || pod.metadata?.deletionTimestamp || binding.has(uid)) return;
    if ((pod.spec?.schedulerName ?? 'default-scheduler') !== 'default-scheduler') return;
    const namespace = pod.metadata?.namespace as string;
    const name = pod.metadata?.name as string;
    if (activePods() >= maxPods) {
      const message = `0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.`;
      const current = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
      if (current?.status === 'False' && current.message === message) return;
      const conditions = [...(pod.status?.conditions ?? []).filter((c) => c.type !== 'PodScheduled'), { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message, lastTransitionTime: new Date() }];
      await schedulerCore.replaceNamespacedPodStatus({ namespace, name, body: { ...pod, status: { ...pod.status, phase: 'Pending', conditions } } }).catch(() => undefined); // changed meanwhile: the next event schedules it again
      return;
    }
    binding.add(uid);
    try {
      await schedulerCore.createNamespacedPodBinding({ namespace, name, body: { metadata: { name, uid }, target: { apiVersion: 'v1', kind: 'Node', name: nodeName } } });
      // Counted until the node's watch shows it, unless that watch was quicker than this answer.
      if (!mine.get(name, namespace) || mine.get(name, namespace)?.metadata?.uid !== uid) justBound.add(uid);
    } catch {
      // deleted or bound meanwhile
    } finally {
      binding.delete(uid);
    }
  }

  const pending = new ListWatch<V1Pod>(
    '/api/v1/pods',
    new Watch(schedulerConfig),
    () => schedulerCore.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed' }),
    false,
    undefined,
    'spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed',
  );
  function scheduleAll(): void {
    // Oldest first. A watched object's times are strings (client-node deserializes lists, not watch events): read them as either.
    const created = (pod: V1Pod) => new Date(pod.metadata?.creationTimestamp ?? 0).getTime();
    const queue = [...pending.list()].sort((a, b) => created(a) - created(b));
    void (async () => {
      for (const pod of queue) await schedule(pod);
    })();
  }

  const mine = new ListWatch<V1Pod>(
    '/api/v1/pods',
    new Watch(nodeConfig),
    () => core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}` }),
    false,
    undefined,
    `spec.nodeName=${nodeName}`,
  );
  mine.on('add', syncNodePod);
  mine.on('update', syncNodePod);
  mine.on('delete', podGone);
  pending.on('add', (pod) => void schedule(pod));
  pending.on('update', (pod) => void schedule(pod));
  for (const informer of [mine, pending]) {
    // A watch that fails (the apiserver restarted, a network error) starts over with a new list.
    informer.on('error', () => {
      if (!closed) setTimeout(() => void informer.start().catch(() => undefined), 500).unref();
    });
  }
  await mine.start();
  await pending.start();

  return {
    nodeName,
    setMaxPods(n) {
      maxPods = n;
      scheduleAll();
    },
    async evictPod(namespace, name, message = EVICTION_MESSAGE) {
      const run = [...runs.values()].find((r) => r.namespace === namespace && r.name === name && !r.stopping);
      if (!run) throw new Error(`node agent: no running pod ${namespace}/${name} on node ${nodeName} to evict`);
      run.evicted = message;
      await stopPod(run, 0);
      await writeStatus(run);
      podEnded(run.uid);
    },
    runningPods: () => [...runs.values()].filter((r) => allSlots(r).some((s) => s.current && !s.current.exit)).length,
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(leaseTimer);
      await mine.stop();
      await pending.stop();
      const all = [...runs.values()];
      for (const run of all) await stopPod(run, 0);
      await Promise.all(all.map((r) => r.writes));
      await kubelet.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** No answer (the code is then a string such as ECONNREFUSED), throttled, or a server error. */
function transient(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code !== 'number' || code === 429 || code >= 500;
}

// --- The Node ------------------------------------------------------------------------------

async function registerNode(core: CoreV1Api, name: string, kubeletPort: number, maxPods: number, extra: Record<string, string>): Promise<void> {
  const capacity = { cpu: '16', memory: '64Gi', 'ephemeral-storage': '100Gi', pods: String(Math.max(maxPods, 110)), ...extra };
  const node: V1Node = {
    metadata: { name, labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': os.arch() === 'arm64' ? 'arm64' : 'amd64' } },
    spec: {},
  };
  await core.createNode({ body: node }).catch((err: unknown) => {
    // A node agent restarted under the same name finds its Node, as a kubelet does.
    if ((err as { code?: number }).code !== 409) throw err;
  });
  const now = new Date();
  const condition = (type: string, status: string, reason: string, message: string) => ({ type, status, reason, message, lastHeartbeatTime: now, lastTransitionTime: now });
  const status: V1Node['status'] = {
    capacity,
    allocatable: capacity,
    conditions: [
      condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
      condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
      condition('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
      condition('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status'),
    ],
    addresses: [{ type: 'InternalIP', address: '127.0.0.1' }, { type: 'Hostname', address: name }],
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

async function renewLease(leases: CoordinationV1Api, name: string): Promise<void> {
  const namespace = 'kube-node-lease';
  // renewTime is a MicroTime: six digits of fractions, which a plain Date does not write.
  const spec = { holderIdentity: name, leaseDurationSeconds: LEASE_SECONDS, renewTime: new V1MicroTime() };
  const lease = await leases.readNamespacedLease({ namespace, name }).catch(() => undefined);
  if (lease) await leases.replaceNamespacedLease({ namespace, name, body: { ...lease, spec: { ...lease.spec, ...spec } } });
  else await leases.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec } });
}

// --- A pod's status, as the kubelet computes it ---------------------------------------------

const allSlots = (run: PodRun): ContainerSlot[] => [...run.initSlots, ...run.slots.values()];

/** Every init container has succeeded (true when there are none). */
const initialized = (run: PodRun) => run.initSlots.every((s) => s.current?.exit?.exitCode === 0);

function podPhase(run: PodRun): 'Pending' | 'Running' | 'Succeeded' | 'Failed' {
  if (run.evicted) return 'Failed';
  if (!initialized(run)) {
    const failed = run.initSlots.some((s) => s.current?.exit && s.current.exit.exitCode !== 0);
    return (failed && (run.pod.spec?.restartPolicy ?? 'Always') === 'Never') || run.stopping ? 'Failed' : 'Pending';
  }
  const slots = [...run.slots.values()];
  if (slots.every((s) => s.current?.exit)) {
    const succeeded = slots.every((s) => s.current?.exit?.exitCode === 0);
    const policy = run.pod.spec?.restartPolicy ?? 'Always';
    // Done unless its containers are about to start again.
    if (policy === 'Never' || run.stopping || (policy === 'OnFailure' && succeeded)) return succeeded ? 'Succeeded' : 'Failed';
    return 'Running';
  }
  // Deleted before every container ran.
  if (run.stopping && slots.every((s) => !s.current || s.current.exit)) return 'Failed';
  return slots.some((s) => s.current) ? 'Running' : 'Pending';
}

function containerStatus(slot: ContainerSlot, image: string): V1ContainerStatus {
  const base = { name: slot.spec.name, image, imageID: `rein-node-agent/${image}`, restartCount: slot.restartCount };
  const terminated = (p: ContainerProcess, message: string | undefined) => ({
    terminated: {
      exitCode: p.exit?.exitCode as number,
      reason: p.exit?.exitCode === 0 ? 'Completed' : 'Error',
      ...(message && { message }),
      startedAt: p.startedAt,
      finishedAt: p.exit?.finishedAt as Date,
      containerID: p.containerId,
    },
  });
  const lastState = slot.previous?.exit ? { lastState: terminated(slot.previous, undefined) } : { lastState: {} };
  const current = slot.current;
  if (!current || slot.waiting) {
    return { ...base, ...lastState, ready: false, started: false, state: { waiting: { reason: slot.waiting?.reason ?? 'ContainerCreating', ...(slot.waiting?.message && { message: slot.waiting.message }) } } };
  }
  if (current.exit) return { ...base, ...lastState, containerID: current.containerId, ready: false, started: false, state: terminated(current, slot.message) };
  return { ...base, ...lastState, containerID: current.containerId, ready: true, started: true, state: { running: { startedAt: current.startedAt } } };
}

function podStatus(run: PodRun, pod: V1Pod): NonNullable<V1Pod['status']> {
  const phase = podPhase(run);
  const statuses = [...run.slots.values()].map((slot) => containerStatus(slot, slot.spec.image ?? ''));
  const initStatuses = run.initSlots.map((slot) => containerStatus(slot, slot.spec.image ?? ''));
  const unready = statuses.filter((s) => !s.ready).map((s) => s.name);
  const terminal = phase === 'Succeeded' || phase === 'Failed';
  const readiness = (type: string): V1PodCondition =>
    unready.length === 0
      ? { type, status: 'True' }
      : { type, status: 'False', reason: terminal ? TERMINAL_POD_REASON : 'ContainersNotReady', ...(!terminal && { message: `containers with unready status: [${unready.join(' ')}]` }) };
  const ours: V1PodCondition[] = [
    { type: 'PodReadyToStartContainers', status: terminal ? 'False' : 'True' },
    initialized(run) ? { type: 'Initialized', status: 'True' } : { type: 'Initialized', status: 'False', reason: 'ContainersNotInitialized', message: `containers with incomplete status: [${run.initSlots.filter((s) => s.current?.exit?.exitCode !== 0).map((s) => s.spec.name).join(' ')}]` },
    readiness('ContainersReady'),
    readiness('Ready'),
    ...(run.evicted ? [{ type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet', message: run.evicted }] : []),
  ];
  const previous = pod.status?.conditions ?? [];
  const now = new Date();
  const conditions = [
    ...previous.filter((c) => !ours.some((o) => o.type === c.type)),
    // A condition keeps its lastTransitionTime until its status changes.
    ...ours.map((c) => ({ ...c, lastTransitionTime: previous.find((p) => p.type === c.type && p.status === c.status)?.lastTransitionTime ?? now })),
  ];
  return {
    ...pod.status,
    phase,
    conditions,
    hostIP: '127.0.0.1',
    hostIPs: [{ ip: '127.0.0.1' }],
    podIP: '127.0.0.1',
    podIPs: [{ ip: '127.0.0.1' }],
    startTime: run.startTime,
    containerStatuses: statuses,
    ...(initStatuses.length > 0 && { initContainerStatuses: initStatuses }),
    ...(run.evicted && { reason: 'Evicted', message: run.evicted }),
  };
}
