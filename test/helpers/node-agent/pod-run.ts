import type { V1Container, V1Pod } from '@kubernetes/client-node';
import type { PodVolumes } from './container-command.js';
import type { ContainerProcess } from './container-process.js';

/** One container of a pod as the node runs it: its current and previous run, or why it waits. */
export interface ContainerSlot {
  spec: V1Container;
  messageFile: string;
  waiting?: { reason: string; message?: string };
  current?: ContainerProcess;
  previous?: ContainerProcess;
  /** The current run's termination message, once it has ended. */
  message?: string;
  restartCount: number;
}

/** A pod bound to this node, from when the node starts it until the pod is gone. */
export interface PodRun {
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

export const allSlots = (run: PodRun): ContainerSlot[] => [...run.initSlots, ...run.slots.values()];
