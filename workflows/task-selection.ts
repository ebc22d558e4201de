import type { RunRolloutsInput } from '../activities/run-rollouts.js';

/** A set of tasks by reference: the file, its pinned hash, and which of its tasks. */
export interface TaskSelection {
  taskSet: RunRolloutsInput['taskSet'];
  taskIds: string[];
}

/** Held-out tasks: replayed with the candidate and with production for the gate, with the harness's eval settings. */
export type HeldoutSelection = TaskSelection & { harnessEnv?: Record<string, string> };

/**
 * An iteration's training tasks × samples. Its ids may name variant tasks (`<task>:<variant>`);
 * the rigger's variants they run in travel with them (the declared ones are in the run's config).
 */
export type TrainSelection = TaskSelection & { samplesPerTask: number; variants?: RunRolloutsInput['variants'] };
