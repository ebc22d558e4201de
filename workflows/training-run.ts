import {
  condition,
  ContinueAsNew,
  continueAsNew,
  defineQuery,
  defineSignal,
  executeChild,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { GateSummary } from '../activities/release.js';
import type { RunRolloutsSummary } from '../activities/run-rollouts.js';
import { REGISTRY_ACTIVITY } from './activity-options.js';
import { IterationFailure } from './failures.js';
import { ReinHeldoutSuccess, ReinPolicyVersion, ReinRunId, ReinStage } from './search-attributes.js';
import { failuresByStage, iterationSummary } from './summaries.js';
import { heldoutBatchId } from '../src/gate/release-ids.js';
import { scoredRollouts } from './rollouts-activity.js';
import { sendNotification } from './notify.js';
import type { TaskSelection } from './task-selection.js';
import { trainingIteration, type TrainingIterationInput, type TrainingIterationResult } from './training-iteration.js';

// Base registration and production's version: short registry steps that do not heartbeat.
const { registerBasePolicy, productionPolicy } = proxyActivities<Activities>(REGISTRY_ACTIVITY);

export type FailedIterationPolicy = 'stop' | 'skip' | 'retry';

export interface TrainingRunInput {
  /** Default: the workflow id (a scheduled run's id is the schedule's id and the time it fired). */
  runId?: string;
  configHash: string;
  /** The configured base policy and where its weights are (registered as a lineage root). */
  base: { version: string; checkpointUri: string };
  /** Train from the version production serves when the run starts (the base when it was never set), or from the base. */
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

/** A held-out replay's result, paired by task. */
export interface HeldoutResult {
  policyVersion: string;
  meanReward: number | null;
  meanRewardByTask: Record<string, number>;
  /** Failed rollouts of the replay by failure class; absent when none failed. */
  byFailureClass?: Record<string, number>;
}

/** What a run has done so far: small, since it travels through continue-as-new. */
export interface RunProgress {
  nextIteration: number;
  policyVersion: string;
  iterations: Array<{
    iteration: number;
    candidate: string | null;
    meanReward: number | null;
    heldoutMeanReward: number | null;
    /** The gate's verdict on the candidate against production, and whether production moved to it. */
    gate?: {
      verdict: GateSummary['verdict'];
      decisionId: string;
      incumbent: string;
      promoted: boolean;
      reasons: string[];
      acceptedRate?: GateSummary['acceptedRate'];
    };
    /** Failed rollouts by failure class per stage (rollouts, heldout, heldout-production); absent when none failed. */
    failures?: Record<string, Record<string, number>>;
    failed?: string;
  }>;
  /**
   * With held-out tasks: the starting policy's replay, the latest candidate's, and the replay of
   * what production serves after the latest gate (the candidate when it was promoted, else the
   * incumbent it was compared with); `production` is absent until a gate ran.
   */
  heldout?: { base: HeldoutResult; latest: HeldoutResult | null; production?: HeldoutResult };
}

export interface RunStatus extends RunProgress {
  runId: string;
  state: 'running' | 'paused' | 'stopping' | 'finished' | 'stopped';
  stage: string;
  /** The workflow doing the current stage's work (this run, or its current iteration). */
  currentWorkflowId?: string;
}

export const pauseSignal = defineSignal('pause');
export const resumeSignal = defineSignal('resume');
export const stopSignal = defineSignal('stop');
export const statusQuery = defineQuery<RunStatus>('status');

/** Iterations kept in the status (the whole history is in the child workflows and the registry). */
const KEPT_ITERATIONS = 50;

/**
 * A training run: iterations as child workflows, one after another, each training from the
 * policy the previous one produced. Pause takes effect between iterations; stop ends the run
 * after the current one. The history starts afresh (continue-as-new) when Temporal suggests it.
 */
export async function trainingRun(input: TrainingRunInput): Promise<RunStatus> {
  const at: RunPosition = {};
  try {
    return await runIterations(input, at);
  } catch (err) {
    // A failed run is told about; a cancelled one, or one continuing as new, is not failed.
    if (!(err instanceof ContinueAsNew) && !isCancellation(err)) {
      await sendNotification({
        event: 'run_failed',
        runId: input.runId ?? workflowInfo().workflowId,
        iteration: at.iteration ?? null,
        versions: { ...(at.policyVersion && { parent: at.policyVersion }) },
        error: rootCause(err),
      });
    }
    throw err;
  }
}

/** Where a run is, for the notification if it fails there. */
interface RunPosition {
  iteration?: number;
  /** The policy the run trains from at that point (the last candidate it produced). */
  policyVersion?: string;
}

async function runIterations(input: TrainingRunInput, at: RunPosition): Promise<RunStatus> {
  const runId = input.runId ?? workflowInfo().workflowId;
  const progress: RunProgress = input.progress ?? {
    nextIteration: 1,
    policyVersion: input.base.version,
    iterations: [],
  };
  const run = { paused: false, stopping: false, stage: 'starting', currentWorkflowId: runId as string | undefined };
  const status = (state?: RunStatus['state']): RunStatus => ({
    runId,
    state: state ?? (run.stopping ? 'stopping' : run.paused ? 'paused' : 'running'),
    stage: run.stage,
    ...(run.currentWorkflowId && { currentWorkflowId: run.currentWorkflowId }),
    ...progress,
  });
  setHandler(pauseSignal, () => void (run.paused = true));
  setHandler(resumeSignal, () => void (run.paused = false));
  setHandler(stopSignal, () => void (run.stopping = true));
  setHandler(statusQuery, () => status());
  upsertSearchAttributes([
    { key: ReinRunId, value: runId },
    { key: ReinPolicyVersion, value: progress.policyVersion },
  ]);

  if (!input.progress) await startFromBase(input, runId, progress, (stage) => (run.stage = stage));
  recordProgress(progress);

  let iterationsHere = 0;
  while (input.iterations === null || progress.nextIteration <= input.iterations) {
    if (run.paused) {
      run.stage = 'paused';
      run.currentWorkflowId = runId;
      upsertSearchAttributes([{ key: ReinStage, value: 'paused' }]);
      await condition(() => !run.paused || run.stopping);
    }
    if (run.stopping) break;
    const iteration = progress.nextIteration;
    at.iteration = iteration;
    at.policyVersion = progress.policyVersion;
    run.stage = `iteration ${iteration}`;
    upsertSearchAttributes([{ key: ReinStage, value: `iteration-${iteration}` }]);

    const outcome = await runIteration(
      input,
      runId,
      iteration,
      progress.policyVersion,
      (id) => (run.currentWorkflowId = id),
    );
    if ('result' in outcome) {
      recordIteration(progress, outcome.result);
    } else {
      progress.iterations.push({
        iteration,
        candidate: null,
        meanReward: null,
        heldoutMeanReward: null,
        failed: outcome.failure,
      });
      if (input.onFailedIteration !== 'skip') {
        // Recorded before the run fails with it: `rein resume` reads why from the memo.
        recordProgress(progress);
        throw new IterationFailure(
          `iteration ${iteration} of run ${runId} failed${outcome.tries > 1 ? ` ${outcome.tries} times` : ''}: ${outcome.failure}`,
        );
      }
    }
    progress.iterations = progress.iterations.slice(-KEPT_ITERATIONS);
    progress.nextIteration = iteration + 1;
    recordProgress(progress);
    // The Web UI shows these lines at a glance, oldest first (the last ten).
    setCurrentDetails(progress.iterations.slice(-10).map(iterationSummary).join('\n'));
    iterationsHere++;
    const every = input.continueAsNewEvery;
    const asked =
      every !== undefined &&
      iterationsHere >= every &&
      (input.iterations === null || progress.nextIteration <= input.iterations);
    if ((workflowInfo().continueAsNewSuggested || asked) && !run.stopping && !run.paused) {
      await continueAsNew<typeof trainingRun>({ ...input, runId, progress });
    }
  }
  run.stage = 'done';
  run.currentWorkflowId = undefined;
  upsertSearchAttributes([{ key: ReinStage, value: run.stopping ? 'stopped' : 'done' }]);
  return status(run.stopping ? 'stopped' : 'finished');
}

/** The memo key under which a run keeps its progress (see recordProgress). */
export const PROGRESS_MEMO = 'progress';

/**
 * Keeps the run's progress in its memo, which Temporal stores with the execution and returns from
 * describe() with no worker running: `rein status` shows it and `rein resume` continues from it
 * when no worker can answer the status query (the run closed, or its worker is gone). Written once
 * the run reaches its iterations and after each one; a run without it never got that far.
 */
function recordProgress(progress: RunProgress): void {
  upsertMemo({ [PROGRESS_MEMO]: progress });
}

/**
 * A fresh run's start: the base registered as the lineage's root, the policy to train from
 * (production's, with run.startFrom: production), and that policy's held-out replay, the yardstick.
 */
async function startFromBase(
  input: TrainingRunInput,
  runId: string,
  progress: RunProgress,
  setStage: (stage: string) => void,
): Promise<void> {
  await registerBasePolicy.executeWithOptions({ summary: `register ${input.base.version}` }, [input.base]);
  const fromProduction = input.startFrom === 'production';
  if (fromProduction) {
    // A recurring run goes on from what serves production now, not from the first base again.
    progress.policyVersion = await productionPolicy({
      base: input.base,
      candidate: input.base.version,
      actor: `run:${runId}`,
    });
    upsertSearchAttributes([{ key: ReinPolicyVersion, value: progress.policyVersion }]);
  }
  const start = progress.policyVersion;
  if (!input.heldout) return;
  // Its batch is the one a gate against that policy replays, so the first gate finds it done.
  setStage('heldout-base');
  upsertSearchAttributes([{ key: ReinStage, value: 'heldout-base' }]);
  const samplesPerTask = input.release?.samplesPerTask ?? 1;
  const base = await scoredRollouts(
    `held-out replay: ${input.heldout.taskIds.length} tasks x ${samplesPerTask} on ${start}`,
    input.heartbeatTimeoutSeconds,
    {
      batchId: heldoutBatchId(start, input.configHash),
      taskSet: input.heldout.taskSet,
      taskIds: input.heldout.taskIds,
      samplesPerTask,
      mode: 'eval',
      policyVersion: start,
      ...(input.heldout.harnessEnv && { harnessEnv: input.heldout.harnessEnv }),
    },
  );
  // Starting from production, the yardstick is what production serves until a gate moves it.
  progress.heldout = {
    base: heldoutResult(start, base),
    latest: null,
    ...(fromProduction && { production: heldoutResult(start, base) }),
  };
}

/**
 * One iteration as a child workflow, tried again as `<run>-it<n>-try<k>` with onFailedIteration
 * `retry`; its result, or the root cause of its last failure. A cancelled run is not a failed
 * iteration: the cancellation goes on up (and is not tried again).
 */
async function runIteration(
  input: TrainingRunInput,
  runId: string,
  iteration: number,
  policyVersion: string,
  setCurrentWorkflow: (workflowId: string) => void,
): Promise<{ result: TrainingIterationResult } | { failure: string; tries: number }> {
  const tasks = input.train.taskIds;
  const first = ((iteration - 1) * input.train.tasksPerIteration) % tasks.length;
  const taskIds = Array.from(
    { length: Math.min(input.train.tasksPerIteration, tasks.length) },
    (_, i) => tasks[(first + i) % tasks.length] as string,
  );
  const replayHeldout =
    input.heldout && (iteration % (input.heldoutEvery ?? 1) === 0 || iteration === input.iterations);
  const tries = input.onFailedIteration === 'retry' ? (input.maxIterationTries ?? 3) : 1;
  let failure = 'failed';
  for (let attempt = 1; attempt <= tries; attempt++) {
    const workflowId = `${runId}-it${iteration}${attempt > 1 ? `-try${attempt}` : ''}`;
    setCurrentWorkflow(workflowId);
    try {
      const result = await executeChild(trainingIteration, {
        workflowId,
        staticSummary: `it${iteration}: train ${policyVersion} on ${taskIds.length} tasks x ${input.train.samplesPerTask}${replayHeldout ? ', then the held-out gate' : ''}`,
        args: [
          {
            runId,
            iteration,
            policyVersion,
            configHash: input.configHash,
            train: { taskSet: input.train.taskSet, taskIds, samplesPerTask: input.train.samplesPerTask },
            ...(replayHeldout && {
              heldout: input.heldout,
              release: {
                samplesPerTask: input.release?.samplesPerTask ?? 1,
                promote: input.release?.promote ?? false,
                base: input.base,
              },
            }),
            ...(input.heartbeatTimeoutSeconds && { heartbeatTimeoutSeconds: input.heartbeatTimeoutSeconds }),
          },
        ],
      });
      return { result };
    } catch (err) {
      if (isCancellation(err)) throw err;
      failure = rootCause(err);
    }
  }
  return { failure, tries };
}

/** A finished iteration into the progress: its entry, the policy the next one trains from, the held-out results. */
function recordIteration(progress: RunProgress, result: TrainingIterationResult): void {
  const { release } = result;
  progress.policyVersion = result.candidate;
  progress.iterations.push(iterationEntry(result));
  upsertSearchAttributes([{ key: ReinPolicyVersion, value: result.candidate }]);
  if (progress.heldout && result.heldout) progress.heldout.latest = heldoutResult(result.candidate, result.heldout);
  if (progress.heldout) progress.heldout.production = productionHeldout(result) ?? progress.heldout.production;
  const success =
    release && (release.promoted ? release.gate.acceptedRate?.candidate : release.gate.acceptedRate?.incumbent);
  if (success !== undefined && success !== null) upsertSearchAttributes([{ key: ReinHeldoutSuccess, value: success }]);
}

function heldoutResult(policyVersion: string, summary: RunRolloutsSummary): HeldoutResult {
  const failed = Object.keys(summary.byFailureClass ?? {}).length > 0;
  return {
    policyVersion,
    meanReward: summary.meanReward,
    meanRewardByTask: summary.meanRewardByTask,
    ...(failed && { byFailureClass: summary.byFailureClass }),
  };
}

/** A finished iteration as the run's progress keeps it. */
function iterationEntry(result: TrainingIterationResult): RunProgress['iterations'][number] {
  const { release } = result;
  const failures = failuresByStage(result);
  return {
    iteration: result.iteration,
    candidate: result.candidate,
    meanReward: result.rollouts.meanReward,
    heldoutMeanReward: result.heldout?.meanReward ?? null,
    ...(release && {
      gate: {
        verdict: release.gate.verdict,
        decisionId: release.gate.decisionId,
        incumbent: release.incumbent,
        promoted: release.promoted,
        reasons: release.gate.reasons,
        ...(release.gate.acceptedRate && { acceptedRate: release.gate.acceptedRate }),
      },
    }),
    ...(Object.keys(failures).length > 0 && { failures }),
  };
}

/** What production serves after the iteration's gate, with its held-out replay: the candidate when promoted, else the incumbent. */
function productionHeldout(result: TrainingIterationResult): HeldoutResult | undefined {
  const { release } = result;
  if (!release) return undefined;
  if (release.promoted) return result.heldout ? heldoutResult(result.candidate, result.heldout) : undefined;
  return release.incumbentHeldout ? heldoutResult(release.incumbent, release.incumbentHeldout) : undefined;
}

/** The innermost message of a failure chain (child workflow → activity → the error the activity threw). */
function rootCause(err: unknown): string {
  let e: unknown = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
