import type { IssuedRollout } from '../gateway/control-client.js';
import type { FailureClass } from './rollout.js';

/**
 * Where a harness run happens: a local process, or a Kubernetes Job. The runner decides what a
 * rollout is and how it is scored; an executor only starts the harness and reports how it ended.
 */
export interface HarnessExecutor {
  /** What stops any run from starting here (bad spec, missing binary, invalid template); each names its fix. */
  problems(): Promise<string[]>;
  /** Runs the harness once for a rollout attempt; never rejects for anything the harness did. */
  run(launch: HarnessLaunch): Promise<HarnessRun>;
  /**
   * The run of the rollout's current attempt that a previous runner left going, if the executor
   * can still follow it (a Job keeps running when its worker dies; a local process does not).
   */
  resume?(launch: HarnessLaunch): Promise<HarnessRun | null>;
  /** Releases what the executor holds (watches, connections). */
  close?(): Promise<void>;
}

export interface HarnessLaunch {
  issued: IssuedRollout;
  /** The task as the harness may see it (hidden fields removed). */
  task: Record<string, unknown>;
  /** The harness's view of the task, as a file; its output goes to `outputFile`. */
  taskFile: string;
  outputFile: string;
  /** For this attempt's log. */
  dir: string;
  /** Extra variables for this run (e.g. greedy decoding for held-out replay). */
  env: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** The rules the harness's log is redacted by as it is written (the gateway's); default: the built-in rules. */
  redaction?: ReadonlyArray<{ name: string; regex: string }>;
  /**
   * Asked when the signal aborts: true when the work is being handed back (its worker is going
   * away) rather than ended for good. An executor whose runs outlive their runner (a Kubernetes
   * Job) leaves them running then, for the next runner to follow.
   */
  handedBack?: () => boolean;
}

export interface HarnessRun {
  exitCode: number | null;
  killedBy: string | null;
  /** Ran past its timeout (counted from the moment it started running). */
  timedOut: boolean;
  cancelled: boolean;
  /** The run never started, or was lost, for a reason that is not the harness's doing. */
  problem: { failureClass: Extract<FailureClass, 'environment' | 'infrastructure'>; reason: string } | null;
  /** The end of its log (stderr, or the pod's log), for failure evidence. */
  logTail: string;
  /** Bytes of output its log file leaves out (it keeps the head and the tail), when it was capped. */
  logTruncatedBytes?: number;
  seconds: number;
  /** Where it ran: a pid, a Job and pod name; stored as evidence with a failure. */
  where: Record<string, unknown>;
}

/**
 * The model endpoint as each official SDK reads it from the environment, so a harness needs no
 * change: the OpenAI SDKs take `OPENAI_BASE_URL` (ending in /v1), the Anthropic SDKs
 * `ANTHROPIC_BASE_URL` (without it: they add /v1/messages) and `ANTHROPIC_API_KEY` (sent as
 * x-api-key); all with the rollout attempt's own key.
 */
export function modelEndpointEnv(issued: IssuedRollout): Record<string, string> {
  return {
    OPENAI_BASE_URL: issued.baseUrl,
    OPENAI_API_KEY: issued.key,
    ANTHROPIC_BASE_URL: issued.baseUrl.replace(/\/v1\/?$/, ''),
    ANTHROPIC_API_KEY: issued.key,
  };
}
