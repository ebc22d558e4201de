import type { GatewayControlClient } from '../gateway/control-client.js';
import type { HarnessExecutor } from './executor.js';
import type { RolloutEnvironment } from '../environments/rollout-environment.js';
import type { CommandRunner } from './process.js';
import type { ProgramSpec } from './program.js';
import type { LogUploadSettings } from './rollout-logs.js';
import type { FailureClass, RolloutMode } from './rollout.js';
import type { Task } from './tasks.js';

// What the rollout runner (runner.ts) is given and what it gives back.

/** The verifier: a program the runner starts apart from the harness, once the harness is gone. */
export type VerifierSpec = ProgramSpec;

export interface RolloutBatchSpec {
  /** Rollout ids are `<batchId>.<task id>.<sample>`: running the same batch again resumes it. */
  batchId: string;
  tasks: Task[];
  samplesPerTask: number;
  mode: RolloutMode;
  /**
   * The version every rollout is pinned to; null leaves them unpinned, as production traffic is:
   * the model the harness names resolves through its alias (and a mirror on it applies).
   */
  policyVersion: string | null;
  /** Task fields the harness must not see (the expected answer). */
  hiddenFields: string[];
  /** reward = Σ weight × component; the verifier's components are all stored. */
  rewardWeights: Record<string, number>;
  /** The most harness runs going at once. */
  concurrency: number;
  /**
   * Harness runs of this harness version going at once at most across every worker (harness.maxRunning): each run
   * holds a lease in the store, taken through the gateway. No limit beyond `concurrency` when unset.
   */
  maxRunning?: number | undefined;
  /** The most harness runs started per second (an API server or a scheduler may need it). */
  launchesPerSecond?: number | undefined;
  /** Attempts per rollout; only infrastructure failures start another. */
  maxAttempts: number;
  /** The most this batch waits, in all, for the gateway and backend to answer before launches (default 0: no wait). */
  dependencyWaitMs?: number;
  workDir: string;
  /** Recorded on every rollout: the harness ledger's key. */
  harnessVersion?: string;
  /** Extra harness variables for this batch (e.g. greedy decoding for held-out replay). */
  harnessEnv?: Record<string, string>;
  /** Regular expressions (case-insensitive) that mark a model reply as a refusal. */
  refusalPatterns?: string[];
  metadata?: Record<string, unknown>;
}

/** The harness or verifier cannot start here: nothing was launched, and retrying will not help. */
export class RolloutSetupError extends Error {
  constructor(readonly problems: string[]) {
    super(`cannot run rollouts: ${problems.join('; ')}`);
    this.name = 'RolloutSetupError';
  }
}

export interface RolloutOutcome {
  rolloutId: string;
  taskId: string;
  sample: number;
  status: 'succeeded' | 'failed' | 'cancelled';
  reward: number | null;
  components: Record<string, number>;
  /** What the harness said its reward was, if it reported one; never trained on. */
  harnessReportedReward: number | null;
  rewardDisagrees: boolean;
  failureClass: FailureClass | null;
  reason: string | null;
  attempts: number;
}

export interface RunnerDeps {
  gateway: GatewayControlClient;
  harness: HarnessExecutor;
  verifier: VerifierSpec;
  onFinished?: (outcome: RolloutOutcome, done: number, total: number) => void;
  /** What the batch is waiting for before it launches more (null: not waiting). */
  onWaiting?: (problem: string | null) => void;
  /**
   * Called before the next attempt when an attempt's model call got a 404 or the gateway could not
   * route the pinned version: the backend or gateway forgot it (a restart). It should serve it again.
   */
  onPolicyLost?: () => Promise<void>;
  signal?: AbortSignal;
  /** What spawns the harness and the verifier (see VerifierDeps.commands). */
  commands?: CommandRunner;
  /** The environment the harness's tools talk to, when the run has one (a session per attempt). */
  environment?: RolloutEnvironment;
  /**
   * Asked when `signal` aborts: true (the default) when it is a user's cancel, which ends the
   * rollouts it interrupts as cancelled; false when the worker is going away, which hands them
   * back instead (RolloutsHandedBack) for another runner to resume.
   */
  cancelIsFinal?: () => boolean;
  /**
   * Where the harness's and the verifier's logs go when each ends (redacted, their last MiBs), for
   * the API and the console on any host; unset, they stay only in the rollout's folder.
   */
  logUpload?: LogUploadSettings;
  /** Told of what goes wrong without failing a rollout (a log that could not be uploaded). */
  onWarning?: (message: string) => void;
}

/** The runner stopped because its worker is going away; the rollouts it left stay resumable. */
export class RolloutsHandedBack extends Error {
  override name = 'RolloutsHandedBack';
}
