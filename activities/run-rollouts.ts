import path from 'node:path';
import { Context } from '@temporalio/activity';
import { isFinalCancel, keepHeartbeating } from './heartbeat.js';
import type { ArtifactStore } from '../src/artifacts/artifact-store.js';
import { DEFAULT_REDACTION_RULES, type RedactionRule } from '../src/gateway/redact.js';
import type { GatewayControlClient } from '../src/gateway/control-client.js';
import type { PolicyRegistry } from '../src/registry/policy-registry.js';
import { ensureServed, type Serving } from '../src/registry/serving.js';
import { harnessExecutor } from '../src/rollouts/harness-executor.js';
import { resolveTaskIds } from '../src/environments/curriculum.js';
import { EnvironmentLoadError } from '../src/environments/load.js';
import { rolloutEnvironment, type RolloutEnvironment } from '../src/environments/rollout-environment.js';
import type { EnvironmentServer } from '../src/environments/server.js';
import type { EnvironmentSettings } from '../src/environments/settings.js';
import type { VariantSpec } from '../src/environments/variant-spec.js';
import { harnessVersion, programSpec, type HarnessSettings } from '../src/rollouts/harness-spec.js';
import {
  RolloutSetupError,
  RolloutsHandedBack,
  runRollouts,
  type RolloutBatchSpec,
  type RolloutOutcome,
} from '../src/rollouts/runner.js';
import type { CommandRunner } from '../src/rollouts/process.js';
import { SAMPLES_MERGE, type RolloutMode } from '../src/rollouts/rollout.js';
import { summarizeOutcomes, type RolloutSetSummary } from '../src/rollouts/shards.js';
import { loadTaskSet, type Task } from '../src/rollouts/tasks.js';
import {
  RolloutSetupFailure,
  RolloutsHandedBackFailure,
  TaskSetChangedFailure,
  UnknownTaskFailure,
} from '../workflows/failures.js';
import { runnableRunDeps, type RunDeps, type RunDepsSource } from './run-deps.js';

export interface RolloutActivityDeps {
  dataDir: string;
  /** Absent when the worker's config names no gateway admin key: rollouts cannot run there. */
  gateway?: GatewayControlClient;
  /** Each set's harness, verifier and rollout rules: its run's own config, by the set's configHash. */
  runs: RunDepsSource;
  /**
   * With both, a version Rein trained is loaded and routed again before rollouts pin it (a
   * restarted backend or gateway forgot it).
   */
  registry?: PolicyRegistry;
  serving?: Serving;
  /** The harness's and verifier's logs are uploaded here, for the API and console on any host. */
  artifacts: ArtifactStore;
  /** The gateway's redaction rules (gateway.redact), applied to the logs before upload; default: the built-in rules. */
  redaction?: readonly RedactionRule[];
  /** What spawns harnesses and verifiers: the worker's process launcher; default, the worker itself. */
  commands?: CommandRunner;
  /** The worker's environment server (started on first use), for runs whose config has an environment. */
  environmentServer?: () => Promise<EnvironmentServer>;
}

/** Small enough for workflow history: the tasks travel as a file reference and ids. */
export interface RunRolloutsInput {
  batchId: string;
  /**
   * The run's config (stored in the artifact store by the client that started it): its harness
   * runs the set. Absent only for a set started by hand, which runs the worker's own config.
   */
  configHash?: string;
  taskSet: { file: string; sha256: string };
  taskIds: string[];
  samplesPerTask: number;
  mode: RolloutMode;
  /** Pins every rollout to this version; null runs them unpinned, as production traffic (a shadow run). */
  policyVersion: string | null;
  /**
   * The rigger's variants the set's variant tasks may run in, beside those the run's config
   * declares (a training or validation set of a run whose environment varies; never held-out).
   */
  variants?: VariantSpec[];
  /** Extra harness variables for this set (e.g. greedy decoding for held-out replay). */
  harnessEnv?: Record<string, string>;
  /**
   * Set when this is one shard of a set that runs this many shards at once (see
   * src/rollouts/shards.ts): the shard takes that share of the worker's concurrency and launch
   * rate, so the set as a whole keeps to them however many workers share it. Absent: the whole set.
   */
  concurrencyShare?: number;
}

/** What a set (or one shard of it) came to; see summarizeOutcomes. */
export type RunRolloutsSummary = RolloutSetSummary;

export interface RolloutProgress {
  done: number;
  total: number;
  /** What the set is waiting for before it launches more (the gateway or a backend not answering). */
  waiting?: string;
}

export function createRolloutActivities(deps: RolloutActivityDeps) {
  return {
    /**
     * Runs the harness on tasks × samples and verifies each run. Heartbeats progress; a retry
     * resumes the set: finished rollouts are read back, not launched again.
     */
    async runRollouts(input: RunRolloutsInput): Promise<RunRolloutsSummary> {
      return runRolloutSet(deps, input);
    },
  };
}

/** The runRollouts activity: the set's tasks checked, the pinned version served, the runner run while it heartbeats. */
async function runRolloutSet(deps: RolloutActivityDeps, input: RunRolloutsInput): Promise<RunRolloutsSummary> {
  const gateway = gatewayOrFail(deps);
  const run = await runnableRunDeps(deps.runs, input.configHash);
  const { harness, verifier } = run;
  const environment = run.environment && (await environmentOf(deps, run.environment, harness, input.variants));
  const tasks = pinnedTasks(input, environment);
  const context = Context.current();
  const onPolicyLost = await servedAgain(deps, gateway, input.policyVersion);
  const version = harnessVersion(harness);
  const executor = harnessExecutor(harness, deps.commands);
  const progress = heartbeatProgress(context, input.taskIds.length * input.samplesPerTask);
  let outcomes: RolloutOutcome[];
  try {
    outcomes = await runRollouts(batchSpec(deps, run, input, tasks, version), {
      gateway,
      harness: executor,
      verifier: programSpec(verifier),
      ...(deps.commands && { commands: deps.commands }),
      ...(environment && { environment }),
      signal: context.cancellationSignal,
      cancelIsFinal: () => isFinalCancel(context),
      logUpload: { artifacts: deps.artifacts, redaction: deps.redaction ?? DEFAULT_REDACTION_RULES },
      onWarning: (message) => context.log.warn(message),
      ...(onPolicyLost && { onPolicyLost }),
      onWaiting: progress.onWaiting,
      onFinished: progress.onFinished,
    });
  } catch (err) {
    if (err instanceof RolloutSetupError) throw new RolloutSetupFailure(err.message, { problems: err.problems });
    // The worker is going away: another worker (or this one, restarted) resumes the set.
    if (err instanceof RolloutsHandedBack) throw new RolloutsHandedBackFailure(err.message);
    throw err;
  } finally {
    progress.stop();
    await executor.close?.();
  }
  return summarizeOutcomes(input.batchId, version, outcomes);
}

/**
 * The run's environment, served by this worker to the harnesses it starts; a module or variant
 * that cannot be used refuses the set at once (no retry can change it).
 */
async function environmentOf(
  deps: RolloutActivityDeps,
  settings: EnvironmentSettings,
  harness: HarnessSettings,
  proposed: readonly VariantSpec[] = [],
): Promise<RolloutEnvironment> {
  const refuse = (problem: string) => new RolloutSetupFailure(problem, { problems: [problem] });
  if (!harness.local)
    throw refuse(
      'environments are served to local harnesses only (harness.local); a Kubernetes harness cannot reach it',
    );
  if (!deps.environmentServer) throw refuse('this worker serves no environments (it was started without a server)');
  try {
    return await rolloutEnvironment(settings, await deps.environmentServer(), proposed);
  } catch (err) {
    if (err instanceof EnvironmentLoadError) throw refuse(err.message);
    throw err;
  }
}

/** Rollouts go through the gateway: a worker without its admin key cannot run them. */
function gatewayOrFail(deps: RolloutActivityDeps): GatewayControlClient {
  if (!deps.gateway)
    throw new RolloutSetupFailure(
      'this worker cannot run rollouts: its config has no gateway admin key (REIN_GATEWAY_ADMIN_KEY or gateway.adminKey file)',
    );
  return deps.gateway;
}

/** The set's tasks, in its order, from the task set the run pinned; refused if the file changed or lacks one. */
function pinnedTasks(input: RunRolloutsInput, environment?: RolloutEnvironment): Task[] {
  const taskSet = loadTaskSet(input.taskSet.file);
  if (taskSet.sha256 !== input.taskSet.sha256) {
    throw new TaskSetChangedFailure(
      `task set ${input.taskSet.file} changed: sha256 ${taskSet.sha256}, the run pinned ${input.taskSet.sha256}`,
    );
  }
  let resolved: ReturnType<typeof resolveTaskIds>;
  try {
    // A training set may name variant tasks (`<task>:<variant>`): made here from the task they vary.
    resolved = resolveTaskIds(taskSet.tasks, input.taskIds, environment);
  } catch (err) {
    // vary() refusing a task, or variant ids meeting: the same on every try.
    throw new RolloutSetupFailure((err as Error).message, { problems: [(err as Error).message] });
  }
  const { tasks, unknown } = resolved;
  if (unknown.length > 0)
    throw new UnknownTaskFailure(`task set ${input.taskSet.file} has no task ${unknown.slice(0, 5).join(', ')}`);
  return tasks;
}

/**
 * A version Rein trained, pinned by the set, is loaded and routed again before the rollouts start
 * (a restarted backend or gateway forgot it); returned, the runner's onPolicyLost, which does it
 * again once for all the rollouts that lost the version together (a backend restart).
 */
async function servedAgain(
  deps: RolloutActivityDeps,
  gateway: GatewayControlClient,
  policyVersion: string | null,
): Promise<(() => Promise<void>) | undefined> {
  const pinned = policyVersion === null ? undefined : await deps.registry?.get(policyVersion);
  const { serving } = deps;
  const serveAgain =
    pinned?.parent && serving ? () => ensureServed(pinned, gateway, serving).then(() => undefined) : undefined;
  if (serveAgain) await serveAgain();
  let servingAgain: Promise<void> | null = null;
  return serveAgain && (() => (servingAgain ??= serveAgain().finally(() => (servingAgain = null))));
}

/** The set's progress, heartbeated on a timer and at each change; `stop` ends the timer. */
function heartbeatProgress(context: Context, total: number) {
  let done = 0;
  let waiting: string | null = null;
  const progress = (): RolloutProgress => ({ done, total, ...(waiting && { waiting }) });
  const stop = keepHeartbeating(context, progress);
  return {
    stop,
    onWaiting: (problem: string | null) => {
      waiting = problem;
      context.heartbeat(progress());
    },
    onFinished: (_outcome: RolloutOutcome, finished: number) => {
      done = finished;
      context.heartbeat(progress());
    },
  };
}

/** The runner's batch: the set, the run's rollout rules, and the worker's pacing. */
function batchSpec(
  deps: RolloutActivityDeps,
  run: RunDeps,
  input: RunRolloutsInput,
  tasks: Task[],
  harnessVersion: string,
): RolloutBatchSpec {
  return {
    batchId: input.batchId,
    tasks,
    samplesPerTask: input.samplesPerTask,
    mode: input.mode,
    policyVersion: input.policyVersion,
    hiddenFields: run.rollouts.hiddenFields,
    rewardWeights: run.rollouts.rewardWeights,
    ...shareOfPacing(run.rollouts, input.concurrencyShare),
    ...(run.rollouts.refusalPatterns && { refusalPatterns: run.rollouts.refusalPatterns }),
    maxAttempts: run.rollouts.maxAttempts,
    // Held across every worker by leases the gateway keeps (harness.maxRunning).
    ...(run.harness?.maxRunning !== undefined && { maxRunning: run.harness.maxRunning }),
    dependencyWaitMs: run.rollouts.dependencyWaitSeconds * 1000,
    workDir: path.join(deps.dataDir, 'rollouts'),
    harnessVersion,
    ...(input.harnessEnv && { harnessEnv: input.harnessEnv }),
    // The gateway reads it to send a tito run's continued calls token in.
    metadata: { [SAMPLES_MERGE]: run.samples.merge },
  };
}

/** The worker's concurrency and launch rate, or a shard's share of them (at least one harness). */
function shareOfPacing(
  pacing: Pick<RunDeps['rollouts'], 'concurrency' | 'launchesPerSecond'>,
  share: number | undefined,
): Pick<RolloutBatchSpec, 'concurrency' | 'launchesPerSecond'> {
  const parts = Math.max(1, share ?? 1);
  return {
    concurrency: Math.max(1, Math.ceil(pacing.concurrency / parts)),
    launchesPerSecond: pacing.launchesPerSecond === undefined ? undefined : pacing.launchesPerSecond / parts,
  };
}
