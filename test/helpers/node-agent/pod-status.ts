/**
 * A pod's status as the kubelet computes it from what the node runs: its phase, conditions and
 * container states.
 */
import type { V1ContainerStatus, V1Pod, V1PodCondition } from '@kubernetes/client-node';
import type { ContainerProcess } from './container-process.js';
import type { ContainerSlot, PodRun } from './pod-run.js';

const TERMINAL_POD_REASON = 'PodCompleted';

/** Every init container has succeeded (true when there are none). */
const initialized = (run: PodRun) => run.initSlots.every((s) => s.current?.exit?.exitCode === 0);

export function podPhase(run: PodRun): 'Pending' | 'Running' | 'Succeeded' | 'Failed' {
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
    if (policy === 'Never' || run.stopping || (policy === 'OnFailure' && succeeded))
      return succeeded ? 'Succeeded' : 'Failed';
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
    return {
      ...base,
      ...lastState,
      ready: false,
      started: false,
      state: {
        waiting: {
          reason: slot.waiting?.reason ?? 'ContainerCreating',
          ...(slot.waiting?.message && { message: slot.waiting.message }),
        },
      },
    };
  }
  if (current.exit)
    return {
      ...base,
      ...lastState,
      containerID: current.containerId,
      ready: false,
      started: false,
      state: terminated(current, slot.message),
    };
  return {
    ...base,
    ...lastState,
    containerID: current.containerId,
    ready: true,
    started: true,
    state: { running: { startedAt: current.startedAt } },
  };
}

export function podStatus(run: PodRun, pod: V1Pod): NonNullable<V1Pod['status']> {
  const phase = podPhase(run);
  const statuses = [...run.slots.values()].map((slot) => containerStatus(slot, slot.spec.image ?? ''));
  const initStatuses = run.initSlots.map((slot) => containerStatus(slot, slot.spec.image ?? ''));
  const unready = statuses.filter((s) => !s.ready).map((s) => s.name);
  const terminal = phase === 'Succeeded' || phase === 'Failed';
  const readiness = (type: string): V1PodCondition =>
    unready.length === 0
      ? { type, status: 'True' }
      : {
          type,
          status: 'False',
          reason: terminal ? TERMINAL_POD_REASON : 'ContainersNotReady',
          ...(!terminal && { message: `containers with unready status: [${unready.join(' ')}]` }),
        };
  const ours: V1PodCondition[] = [
    { type: 'PodReadyToStartContainers', status: terminal ? 'False' : 'True' },
    initialized(run)
      ? { type: 'Initialized', status: 'True' }
      : {
          type: 'Initialized',
          status: 'False',
          reason: 'ContainersNotInitialized',
          message: `containers with incomplete status: [${run.initSlots
            .filter((s) => s.current?.exit?.exitCode !== 0)
            .map((s) => s.spec.name)
            .join(' ')}]`,
        },
    readiness('ContainersReady'),
    readiness('Ready'),
    ...(run.evicted
      ? [{ type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet', message: run.evicted }]
      : []),
  ];
  const previous = pod.status?.conditions ?? [];
  const now = new Date();
  const conditions = [
    ...previous.filter((c) => !ours.some((o) => o.type === c.type)),
    // A condition keeps its lastTransitionTime until its status changes.
    ...ours.map((c) => ({
      ...c,
      lastTransitionTime: previous.find((p) => p.type === c.type && p.status === c.status)?.lastTransitionTime ?? now,
    })),
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
