import type { TrainingIterationInput } from './training-iteration.js';
import type { RunProgress } from './run-progress.js';
import type { ShardSettings } from '../src/rollouts/shards.js';
import type { TaskSelection } from './task-selection.js';

export type FailedIterationPolicy = 'stop' | 'skip' | 'retry';

export interface TrainingRunInput {
  /** Default: the workflow id (a scheduled run's id is the schedule's id and the time it fired). */
  runId?: string;
  /** The run's config, stored in the artifact store when the run started: workers load its harness and more by it. */
  configHash: string;
  /** The run's harness version, in its held-out replay and decision ids (absent in runs started before it was). */
  harnessVersion?: string;
  /** The configured base policy and where its weights are (registered as a lineage root). */
  base: { version: string; checkpointUri: string };
  /**
   * Train from the version production serves when the run starts (the base when it was never set), or from the base.
   */
  startFrom?: 'production' | 'base';
  /** Null: until stopped. */
  iterations: number | null;
  /** The run's training tasks; each iteration takes the next `tasksPerIteration` of them, wrapping around. */
  train: TaskSelection & { tasksPerIteration: number; samplesPerTask: number };
  heldout?: TrainingIterationInput['heldout'];
  /** Samples per held-out task for the gate, and whether a pass moves production (default: 1, no). */
  release?: { samplesPerTask: number; promote: boolean };
  /** Replay held-out tasks after every n-th iteration and after the last (default 1: every iteration). */
  heldoutEvery?: number;
  heartbeatTimeoutSeconds?: number;
  /**
   * `sync` (absent: runs started before schedules existed): each iteration's rollouts, then its
   * update and held-out replay. `async`: the next iteration's rollouts run, from the newest version
   * the run has trained, while this one updates and replays; its samples are then one version
   * behind the policy they train (bounded by samples.maxVersionsBehind, corrected by importance
   * weights from the journaled behaviour log-probs).
   */
  schedule?: 'sync' | 'async';
  /** How rollout sets split over workers (the config's rollouts.shard); absent: DEFAULT_SHARD_SETTINGS. */
  shards?: ShardSettings;
  /** The config declares environment variants: each iteration checks new ones and mixes the kept ones in. */
  environmentVariants?: boolean;
  onFailedIteration: FailedIterationPolicy;
  /** With `retry`: tries per iteration before the run stops. */
  maxIterationTries?: number;
  /** Carried across continue-as-new. */
  progress?: RunProgress;
  /**
   * Also continue as new after this many iterations of one execution (never after the last one),
   * besides when Temporal suggests it. For tests; absent (the default), only Temporal's suggestion.
   */
  continueAsNewEvery?: number;
}

/** The training tasks of an iteration: the next `tasksPerIteration` of the run's tasks, wrapping around. */
export function iterationTaskIds(input: TrainingRunInput, iteration: number): string[] {
  const tasks = input.train.taskIds;
  const first = ((iteration - 1) * input.train.tasksPerIteration) % tasks.length;
  return Array.from(
    { length: Math.min(input.train.tasksPerIteration, tasks.length) },
    (_, i) => tasks[(first + i) % tasks.length] as string,
  );
}

/** Whether the run goes on after `iteration` (a run without an iteration count goes on until stopped). */
export const hasIterationAfter = (input: TrainingRunInput, iteration: number): boolean =>
  input.iterations === null || iteration < input.iterations;
