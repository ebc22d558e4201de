import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { CoreV1Api, V1Container, V1Pod } from '@kubernetes/client-node';
import {
  containerCommand,
  ContainerStartError,
  type ImageSpec,
  type ReadAll,
  type ReadKey,
} from './container-command.js';
import { ContainerProcess, terminationMessage } from './container-process.js';
import type { ContainerLogs } from './kubelet-server.js';
import { allSlots, type ContainerSlot, type PodRun } from './pod-run.js';
import { podPhase } from './pod-status.js';
import type { WriteStatus } from './status-reporter.js';

export interface PodRunnerOptions {
  nodeName: string;
  /** The node's folder; each pod's termination logs and emptyDir volumes go in a folder named by its UID. */
  dir: string;
  images: Record<string, ImageSpec>;
  /** A client with the node's credentials. */
  core: CoreV1Api;
  envSources: { readKey: ReadKey; readAll: ReadAll };
  writeStatus: WriteStatus;
  /** A pod of this node is gone or done: it no longer counts against maxPods. */
  podEnded(uid: string): void;
  isClosed(): boolean;
}

const ACTIVE = (pod: V1Pod) => pod.status?.phase !== 'Succeeded' && pod.status?.phase !== 'Failed';

/**
 * The kubelet's part for the pods bound to this node: runs their containers as local processes
 * (init containers first, one after another), restarts them under OnFailure/Always, stops them on
 * a graceful deletion (SIGTERM, SIGKILL after the grace period) and then deletes the pod for good,
 * and evicts as under node pressure. Each change is reported through `writeStatus`.
 */
export class PodRunner {
  private readonly options: PodRunnerOptions;
  private readonly runs = new Map<string, PodRun>();

  constructor(options: PodRunnerOptions) {
    this.options = options;
  }

  /** The node's watch shows a pod bound here, new or changed: start it, or finish its deletion. */
  sync(pod: V1Pod): void {
    const uid = pod.metadata?.uid as string;
    const run = this.runs.get(uid);
    if (run) run.pod = pod;
    if (pod.metadata?.deletionTimestamp) {
      void this.finishDeletion(pod);
    } else if (!run && ACTIVE(pod)) {
      void this.startPod(pod);
    }
  }

  /** The pod is gone from the apiserver: its containers die at once and its folder goes. */
  gone(pod: V1Pod): void {
    const uid = pod.metadata?.uid as string;
    const run = this.runs.get(uid);
    if (run) {
      run.stopping = true;
      for (const slot of allSlots(run)) slot.current?.kill('SIGKILL');
      this.runs.delete(uid);
      void Promise.all(allSlots(run).flatMap((s) => (s.current ? [s.current.done] : []))).then(() =>
        rmSync(path.join(this.options.dir, uid), { recursive: true, force: true }),
      );
    }
    this.options.podEnded(uid);
  }

  /** Evicts a running pod as the kubelet does under node pressure; resolves once its status says so. */
  async evict(namespace: string, name: string, message: string): Promise<void> {
    const run = [...this.runs.values()].find((r) => r.namespace === namespace && r.name === name && !r.stopping);
    if (!run)
      throw new Error(`node agent: no running pod ${namespace}/${name} on node ${this.options.nodeName} to evict`);
    run.evicted = message;
    await this.stopPod(run, 0);
    await this.options.writeStatus(run);
    this.options.podEnded(run.uid);
  }

  /** A container's runs, for the kubelet's log endpoint (the newest pod of that name). */
  containerRuns: ContainerLogs['runs'] = (namespace, name, container) => {
    const run = [...this.runs.values()].reverse().find((r) => r.namespace === namespace && r.name === name);
    const slot = run?.slots.get(container) ?? run?.initSlots.find((s) => s.spec.name === container);
    if (!slot) return undefined;
    return {
      ...(slot.current && { current: slot.current }),
      ...(slot.previous && { previous: slot.previous }),
      ...(slot.waiting && { waiting: slot.waiting.reason }),
    };
  };

  /** A pod's phase as the node runs it, else as its status says (one the node does not run). */
  phaseOf(pod: V1Pod): string | undefined {
    const run = this.runs.get(pod.metadata?.uid as string);
    return run ? podPhase(run) : pod.status?.phase;
  }

  /** Pods with a container process running now. */
  runningPods(): number {
    return [...this.runs.values()].filter((r) => allSlots(r).some((s) => s.current && !s.current.exit)).length;
  }

  /** Kills every container at once and waits for their status writes. */
  async stopAll(): Promise<void> {
    const all = [...this.runs.values()];
    for (const run of all) await this.stopPod(run, 0);
    await Promise.all(all.map((r) => r.writes));
  }

  private async startPod(pod: V1Pod): Promise<void> {
    const uid = pod.metadata?.uid as string;
    const podDir = path.join(this.options.dir, uid);
    mkdirSync(podDir, { recursive: true });
    const emptyDirs: Record<string, string> = {};
    for (const volume of pod.spec?.volumes ?? []) {
      if (!volume.emptyDir) continue;
      emptyDirs[volume.name] = path.join(podDir, 'volumes', volume.name);
      mkdirSync(emptyDirs[volume.name] as string, { recursive: true });
    }
    const initializing = (pod.spec?.initContainers?.length ?? 0) > 0;
    const slot = (c: V1Container): ContainerSlot => ({
      spec: c,
      messageFile: path.join(podDir, `${c.name}.termination-log`),
      waiting: { reason: initializing ? 'PodInitializing' : 'ContainerCreating' },
      restartCount: 0,
    });
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
    this.runs.set(uid, run);
    void this.options.writeStatus(run);
    if (!(await this.initialize(run))) return;
    await Promise.all(
      [...run.slots.values()].map(async (slot) => {
        const process = await this.startContainer(run, slot);
        if (process) void process.done.then(() => this.containerEnded(run, slot, process));
      }),
    );
    await this.options.writeStatus(run);
  }

  /** Runs the init containers in order; true once the last has succeeded. */
  private async initialize(run: PodRun): Promise<boolean> {
    for (const slot of run.initSlots) {
      for (;;) {
        const process = await this.startContainer(run, slot);
        await this.options.writeStatus(run);
        if (!process) return false; // it cannot start: it waits, as the kubelet's does, until the pod goes
        await process.done;
        slot.message = terminationMessage(process, slot.messageFile, slot.spec.terminationMessagePolicy);
        await this.options.writeStatus(run);
        if (run.stopping || this.options.isClosed()) return false;
        if (process.exit?.exitCode === 0) break;
        if ((run.pod.spec?.restartPolicy ?? 'Always') === 'Never') {
          this.options.podEnded(run.uid);
          return false;
        }
        slot.restartCount += 1;
      }
    }
    return true;
  }

  private async startContainer(run: PodRun, slot: ContainerSlot): Promise<ContainerProcess | undefined> {
    let command;
    try {
      command = await containerCommand(
        run.pod,
        slot.spec,
        this.options.images,
        slot.messageFile,
        this.options.envSources,
        run.volumes,
      );
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

  private async containerEnded(run: PodRun, slot: ContainerSlot, process: ContainerProcess): Promise<void> {
    slot.message = terminationMessage(process, slot.messageFile, slot.spec.terminationMessagePolicy);
    const policy = run.pod.spec?.restartPolicy ?? 'Always';
    const restart =
      !run.stopping &&
      !this.options.isClosed() &&
      (policy === 'Always' || (policy === 'OnFailure' && process.exit?.exitCode !== 0));
    if (restart) {
      slot.restartCount += 1;
      const next = await this.startContainer(run, slot);
      if (next) void next.done.then(() => this.containerEnded(run, slot, next));
    }
    await this.options.writeStatus(run);
    if (podPhase(run) === 'Succeeded' || podPhase(run) === 'Failed') this.options.podEnded(run.uid);
  }

  private async stopPod(run: PodRun, graceSeconds: number): Promise<void> {
    run.stopping = true;
    const processes = allSlots(run).flatMap((s) => (s.current && !s.current.exit ? [s.current] : []));
    for (const p of processes) p.kill('SIGTERM');
    const killer = setTimeout(() => processes.forEach((p) => p.kill('SIGKILL')), graceSeconds * 1000);
    await Promise.all(processes.map((p) => p.done));
    clearTimeout(killer);
  }

  /** The kubelet's part of a graceful deletion: stop the containers, report, then delete for good. */
  private async finishDeletion(pod: V1Pod): Promise<void> {
    const run = this.runs.get(pod.metadata?.uid as string);
    if (run) {
      if (run.deleting) return; // an earlier event of this deletion does it
      run.deleting = true;
      // Also when it is stopping already (evicted): the pod goes once its processes have ended.
      await this.stopPod(
        run,
        pod.metadata?.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30,
      );
      await this.options.writeStatus(run);
    }
    // Grace 0 with the pod's UID as precondition, as the kubelet's status manager deletes. Both in
    // the body: with a body the apiserver reads no query parameters, so a gracePeriodSeconds=0
    // query beside a body of preconditions is ignored and the pod stays, still terminating.
    await this.options.core
      .deleteNamespacedPod({
        namespace: pod.metadata?.namespace as string,
        name: pod.metadata?.name as string,
        body: { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata?.uid as string } },
      })
      .catch((err: unknown) => {
        const code = (err as { code?: number }).code;
        // 404: gone already; 409: a new pod of the same name (the precondition held).
        if (code !== 404 && code !== 409 && !this.options.isClosed())
          console.warn(
            `node agent: pod ${pod.metadata?.namespace}/${pod.metadata?.name} not deleted: ${(err as Error).message}`,
          );
      });
  }
}
