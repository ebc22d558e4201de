import type { TrainResult } from '../policy/local-trainer.js';
import type { LogFollower } from '../rollouts/rollout-logs.js';

/** Where a policy update runs: the local trainer as a child process, or a Kubernetes Job. */
export interface PolicyTrainer {
  /** Trains `parent` on the batch into `outputDir`; a retry finds a finished result instead of training again. */
  train(input: TrainInput): Promise<TrainResult>;
  /**
   * True when it takes the batch and parent as artifact-store URIs and stores the output at
   * `outputUri` itself (a Kubernetes Job whose pod stages them): the worker then stages nothing.
   */
  readonly readsArtifactStore?: boolean;
}

export interface TrainInput {
  parentCheckpoint: string;
  batchPath: string;
  outputDir: string;
  /** With a trainer that reads the artifact store: the URI it stores the output folder at. */
  outputUri?: string | undefined;
  signal?: AbortSignal | undefined;
  /**
   * Asked when the signal aborts: true when the update is handed back (its worker is going away)
   * rather than cancelled. A trainer that outlives its worker (a Kubernetes Job) runs on then, for
   * the next try to follow.
   */
  handedBack?: (() => boolean) | undefined;
  /**
   * Given the file the trainer's log is written to: follows it into the artifact store while it grows (the console's
   * live log of the update); the trainer stops it, final, when the log is complete.
   */
  followLog?: ((file: string) => LogFollower) | undefined;
}
