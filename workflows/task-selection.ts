import type { RunRolloutsInput } from '../activities/run-rollouts.js';

/** A set of tasks by reference: the file, its pinned hash, and which of its tasks. */
export interface TaskSelection {
  taskSet: RunRolloutsInput['taskSet'];
  taskIds: string[];
}

/** Held-out tasks: replayed with the candidate and with production for the gate, with the harness's eval settings. */
export type HeldoutSelection = TaskSelection & { harnessEnv?: Record<string, string> };
