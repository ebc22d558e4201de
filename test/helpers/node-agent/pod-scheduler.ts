import type { CoreV1Api, ListWatch, V1Pod } from '@kubernetes/client-node';

export interface PodSchedulerOptions {
  /** A client as system:kube-scheduler, which may bind pods and write their PodScheduled condition. */
  core: CoreV1Api;
  nodeName: string;
  maxPods: number;
  /** The pods bound to this node, as the node's watch shows them. */
  nodePods: ListWatch<V1Pod>;
  /** Pods no node has yet, not finished: what there is to schedule. */
  unscheduled: ListWatch<V1Pod>;
  /** The phase of a pod of this node: as the node runs it, else as its status says. */
  phaseOf(pod: V1Pod): string | undefined;
  isClosed(): boolean;
}

/**
 * The scheduler's part, for one node: binds each pending pod to it (pods/binding) while fewer than
 * `maxPods` of its pods are active; the rest get PodScheduled=False, reason Unschedulable
 * ("Too many pods"), as the scheduler reports them. Requests, selectors, taints and affinity are
 * ignored.
 */
export class PodScheduler {
  private maxPods: number;
  private readonly options: PodSchedulerOptions;
  /** Pods whose binding call is in flight. */
  private readonly binding = new Set<string>();
  /** Pods bound here that the node's watch has not shown yet: the scheduler's "assumed" pods. */
  private readonly justBound = new Set<string>();

  constructor(options: PodSchedulerOptions) {
    this.options = options;
    this.maxPods = options.maxPods;
  }

  /** Changes how many pods the node takes at once, and schedules again with it. */
  setMaxPods(n: number): void {
    this.maxPods = n;
    this.scheduleAll();
  }

  /** The node's watch has shown the pod: it counts from there. */
  seen(uid: string): void {
    this.justBound.delete(uid);
  }

  /** A pod of this node is gone or done: it no longer counts against maxPods. */
  podEnded(uid: string): void {
    this.justBound.delete(uid);
    this.scheduleAll();
  }

  async schedule(pod: V1Pod): Promise<void> {
    const { core, nodeName, nodePods } = this.options;
    const uid = pod.metadata?.uid as string;
    if (this.options.isClosed() || pod.spec?.nodeName || pod.metadata?.deletionTimestamp || this.binding.has(uid))
      return;
    if ((pod.spec?.schedulerName ?? 'default-scheduler') !== 'default-scheduler') return;
    const namespace = pod.metadata?.namespace as string;
    const name = pod.metadata?.name as string;
    if (this.activePods() >= this.maxPods) {
      const message = `0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.`;
      const current = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
      if (current?.status === 'False' && current.message === message) return;
      const conditions = [
        ...(pod.status?.conditions ?? []).filter((c) => c.type !== 'PodScheduled'),
        { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message, lastTransitionTime: new Date() },
      ];
      await core
        .replaceNamespacedPodStatus({
          namespace,
          name,
          body: { ...pod, status: { ...pod.status, phase: 'Pending', conditions } },
        })
        .catch(() => undefined); // changed meanwhile: the next event schedules it again
      return;
    }
    this.binding.add(uid);
    try {
      await core.createNamespacedPodBinding({
        namespace,
        name,
        body: { metadata: { name, uid }, target: { apiVersion: 'v1', kind: 'Node', name: nodeName } },
      });
      // Counted until the node's watch shows it, unless that watch was quicker than this answer.
      if (!nodePods.get(name, namespace) || nodePods.get(name, namespace)?.metadata?.uid !== uid)
        this.justBound.add(uid);
    } catch {
      // deleted or bound meanwhile
    } finally {
      this.binding.delete(uid);
    }
  }

  scheduleAll(): void {
    // Oldest first. A watched object's times are strings (client-node deserializes lists, not watch events): read them
    // as either.
    const created = (pod: V1Pod) => new Date(pod.metadata?.creationTimestamp ?? 0).getTime();
    const queue = [...this.options.unscheduled.list()].sort((a, b) => created(a) - created(b));
    void (async () => {
      for (const pod of queue) await this.schedule(pod);
    })();
  }

  /**
   * The pods that count against maxPods, counted afresh from what the node runs and has bound, not
   * kept as a tally (a tally leaked when a fast pod ended before its binding call returned).
   */
  private activePods(): number {
    const active = new Set([...this.binding, ...this.justBound]);
    for (const pod of this.options.nodePods.list()) {
      const phase = this.options.phaseOf(pod);
      if (phase !== 'Succeeded' && phase !== 'Failed') active.add(pod.metadata?.uid as string);
    }
    return active.size;
  }
}
