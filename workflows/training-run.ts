import {
  condition,
  ContinueAsNew,
  continueAsNew,
  defineQuery,
  defineSignal,
  isCancellation,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { REGISTRY_ACTIVITY } from './activity-options.js';
import { IterationFailure, rootMessage } from './failures.js';
import { ReinPolicyVersion, ReinRunId, ReinStage } from './search-attributes.js';
import { heldoutBatchId } from '../src/gate/release-ids.js';
import { heldoutReplay } from './rollouts-activity.js';
import { sendNotification } from './notify.js';
import {
  advanceProgress,
  heldoutResult,
  recordFailedIteration,
  recordIteration,
  recordProgress,
  type RunProgress,
} from './run-progress.js';
import { rolloutSetWorkflowId, startRolloutsAhead, trainRollouts, type RolloutsAhead } from './rollouts-ahead.js';
import { hasIterationAfter, type TrainingRunInput } from './run-input.js';
import { runIteration } from './run-iteration.js';
import type { SampledRollouts } from './sampled-rollouts.js';

// Base registration and production's version: short registry steps that do not heartbeat.
const { registerBasePolicy, productionPolicy } = proxyActivities<Activities>(REGISTRY_ACTIVITY);

export type { FailedIterationPolicy, TrainingRunInput } from './run-input.js';

/**
 * How a run ended without finishing, from Temporal's status of its execution: the client reads
 * these (describeRun); the workflow never reports them, since a cancel or a terminate ends it.
 */
export type ClosedRunState = 'cancelled' | 'failed' | 'terminated' | 'timed_out';

export interface RunStatus extends RunProgress {
  runId: string;
  state: 'running' | 'paused' | 'stopping' | 'finished' | 'stopped' | ClosedRunState;
  stage: string;
  /** The workflow doing the current stage's work (this run, or its current iteration). */
  currentWorkflowId?: string;
  /** The asynchronous schedule: the next iteration's rollouts, running beside the current iteration. */
  rolloutsAhead?: { iteration: number; policyVersion: string; workflowId: string };
}

export const pauseSignal = defineSignal('pause');
export const resumeSignal = defineSignal('resume');
export const stopSignal = defineSignal('stop');
export const statusQuery = defineQuery<RunStatus>('status');

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
        error: rootMessage(err),
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
  const run = answerSignalsAndStatus(runId, progress);
  upsertSearchAttributes([
    { key: ReinRunId, value: runId },
    { key: ReinPolicyVersion, value: progress.policyVersion },
  ]);

  if (!input.progress) await startFromBase(input, runId, progress, (stage) => (run.stage = stage));
  recordProgress(progress);

  let iterationsHere = 0;
  while (input.iterations === null || progress.nextIteration <= input.iterations) {
    if (run.paused) await pausedUntilResumed(run, runId);
    if (run.stopping) break;
    const iteration = progress.nextIteration;
    at.iteration = iteration;
    at.policyVersion = progress.policyVersion;
    run.stage = `iteration ${iteration}`;
    upsertSearchAttributes([{ key: ReinStage, value: `iteration-${iteration}` }]);

    const sampled =
      input.schedule === 'async' ? await sampledRollouts(input, runId, iteration, progress, run) : undefined;
    const ahead =
      sampled && !run.stopping && hasIterationAfter(input, iteration)
        ? rolloutsAhead(input, runId, iteration, progress, run)
        : null;
    const outcome = await runIteration(
      input,
      runId,
      iteration,
      progress.policyVersion,
      (id) => (run.currentWorkflowId = id),
      sampled,
    );
    if ('result' in outcome) recordIteration(progress, outcome.result);
    else failedIteration(input, runId, progress, iteration, outcome);
    // Awaited before anything else: a continue-as-new would end the set, and the next iteration needs it.
    progress.sampled = (await ahead?.settled) ?? undefined;
    run.ahead = undefined;
    advanceProgress(progress, iteration);
    iterationsHere++;
    if (
      (workflowInfo().continueAsNewSuggested || continueAsNewAsked(input, progress, iterationsHere)) &&
      !run.stopping &&
      !run.paused
    ) {
      await continueAsNew<typeof trainingRun>({ ...input, runId, progress });
    }
  }
  run.stage = 'done';
  run.currentWorkflowId = undefined;
  upsertSearchAttributes([{ key: ReinStage, value: run.stopping ? 'stopped' : 'done' }]);
  return runStatus(runId, run, progress, run.stopping ? 'stopped' : 'finished');
}

/** What the run's signals set and its status query reads, besides the progress. */
interface RunControl {
  paused: boolean;
  stopping: boolean;
  stage: string;
  currentWorkflowId: string | undefined;
  /** The asynchronous schedule's next rollout set, while it runs beside the iteration. */
  ahead?: RolloutsAhead;
}

/** The run's signal handlers (pause, resume, stop) and status query, over the control state they share. */
function answerSignalsAndStatus(runId: string, progress: RunProgress): RunControl {
  const run: RunControl = { paused: false, stopping: false, stage: 'starting', currentWorkflowId: runId };
  setHandler(pauseSignal, () => void (run.paused = true));
  setHandler(resumeSignal, () => void (run.paused = false));
  setHandler(stopSignal, () => {
    run.stopping = true;
    // Nothing will train on the next iteration's rollouts: stop them now rather than after this iteration.
    run.ahead?.cancel();
  });
  setHandler(statusQuery, () => runStatus(runId, run, progress));
  return run;
}

function runStatus(runId: string, run: RunControl, progress: RunProgress, state?: RunStatus['state']): RunStatus {
  return {
    runId,
    state: state ?? (run.stopping ? 'stopping' : run.paused ? 'paused' : 'running'),
    stage: run.stage,
    ...(run.currentWorkflowId && { currentWorkflowId: run.currentWorkflowId }),
    ...(run.ahead && {
      rolloutsAhead: {
        iteration: run.ahead.iteration,
        policyVersion: run.ahead.policyVersion,
        workflowId: run.ahead.workflowId,
      },
    }),
    ...progress,
  };
}

/** A paused run, between iterations: it waits for resume, or for stop. */
async function pausedUntilResumed(run: RunControl, runId: string): Promise<void> {
  run.stage = 'paused';
  run.currentWorkflowId = runId;
  upsertSearchAttributes([{ key: ReinStage, value: 'paused' }]);
  await condition(() => !run.paused || run.stopping);
}

/**
 * A failed iteration into the progress; the run goes on past it with onFailedIteration `skip`,
 * and otherwise fails with it, its progress recorded first (`rein resume` reads why from the memo).
 */
function failedIteration(
  input: TrainingRunInput,
  runId: string,
  progress: RunProgress,
  iteration: number,
  outcome: { failure: string; tries: number },
): void {
  recordFailedIteration(progress, iteration, outcome.failure);
  if (input.onFailedIteration === 'skip') return;
  recordProgress(progress);
  throw new IterationFailure(
    `iteration ${iteration} of run ${runId} failed${outcome.tries > 1 ? ` ${outcome.tries} times` : ''}: ${outcome.failure}`,
  );
}

/** Whether the run's own continueAsNewEvery asks for a new execution now (never after its last iteration). */
function continueAsNewAsked(input: TrainingRunInput, progress: RunProgress, iterationsHere: number): boolean {
  const every = input.continueAsNewEvery;
  return (
    every !== undefined &&
    iterationsHere >= every &&
    (input.iterations === null || progress.nextIteration <= input.iterations)
  );
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
  const base = await heldoutReplay(
    {
      heldout: input.heldout,
      samplesPerTask: input.release?.samplesPerTask ?? 1,
      policyVersion: start,
      batchId: heldoutBatchId(start, input.configHash, input.harnessVersion),
      configHash: input.configHash,
    },
    input.heartbeatTimeoutSeconds,
    input.shards,
  );
  // Starting from production, the yardstick is what production serves until a gate moves it.
  progress.heldout = {
    base: heldoutResult(start, base),
    latest: null,
    ...(fromProduction && { production: heldoutResult(start, base) }),
  };
}

/**
 * The asynchronous schedule's rollouts for `iteration`: run during the previous iteration, or now
 * (the first iteration, or after the set ahead failed or was stopped). Undefined when this set
 * fails too: the iteration then runs its own, under the run's failed-iteration policy.
 */
async function sampledRollouts(
  input: TrainingRunInput,
  runId: string,
  iteration: number,
  progress: RunProgress,
  run: RunControl,
): Promise<SampledRollouts | undefined> {
  if (progress.sampled?.iteration === iteration) return progress.sampled;
  run.stage = `iteration ${iteration} rollouts`;
  run.currentWorkflowId = rolloutSetWorkflowId(runId, iteration);
  try {
    return await trainRollouts(input, runId, iteration, progress.policyVersion);
  } catch (err) {
    if (isCancellation(err)) throw err;
    return undefined;
  } finally {
    run.stage = `iteration ${iteration}`;
  }
}

/** Starts the next iteration's rollouts from the newest version the run has trained, beside this iteration. */
function rolloutsAhead(
  input: TrainingRunInput,
  runId: string,
  iteration: number,
  progress: RunProgress,
  run: RunControl,
): RolloutsAhead {
  run.ahead = startRolloutsAhead(input, runId, iteration + 1, progress.policyVersion);
  return run.ahead;
}
