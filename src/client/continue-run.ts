import {
  CancelledFailure,
  TerminatedFailure,
  TimeoutFailure,
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  type Client,
  type WorkflowExecutionDescription,
  type WorkflowHandle,
} from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { RunProgress, RunStatus, TrainingRunInput, trainingRun } from '../../workflows/index.js';
import { refuseConcurrentPromotion } from './promotion-guard.js';
import { signalRun } from './run-control.js';
import { failureMessage, isTemporalUnreachable, RunNotFoundError, RunNotResumableError } from './run-errors.js';
import { recordedProgress, runExecutionStatus, stageAttribute, type RunResume } from './run-status.js';

export interface RunContinuation extends RunResume {
  runId: string;
  taskQueue: string;
  /** The iteration the closed execution was in when it ended (from its ReinStage), if it was in one. */
  endedInIteration: number | undefined;
  /** The new execution. */
  executionRunId: string;
  iterations: number | null;
  /** How many times this run has been continued, this time included. */
  resumes: number;
}

/**
 * Continues a run whose execution failed, was terminated, timed out or was cancelled: a new
 * execution with the same workflow id (the run id), on the same task queue, with the run's original
 * input and its progress, so that it skips the base registration and the base's held-out replay and
 * starts at the first unfinished iteration from the last policy that iteration trained (a failed
 * iteration runs again; its finished rollouts are reused, since batch ids are per iteration).
 *
 * The progress is the run's own record: the memo it keeps after each iteration (see
 * workflows/run-progress.ts: recordProgress), which Temporal returns without a worker. A run that
 * recorded none never reached its first iteration: it starts over with its original input.
 *
 * Refused (RunNotResumableError) for a running run (a paused one is resumed by signal) and a
 * completed one. The memo's `resumes` records each continuation.
 */
export async function continueRun(
  client: Client,
  runId: string,
  options: { allowConcurrentPromotion?: boolean } = {},
): Promise<RunContinuation> {
  const { described, handle } = await endedExecution(client, runId);
  const execution = described.status.name;
  const memo = (described.memo ?? {}) as Record<string, unknown>;
  if (typeof memo.promotes === 'string' && !options.allowConcurrentPromotion)
    await refuseConcurrentPromotion(client, runId, memo.promotes);
  const { input, taskQueue } = await startedWith(client, described);
  const { progress, fromIteration, startOver, failed } = continuationPoint(described, input);

  // Children a terminated or timed-out run leaves are ended by their parent-close policy, but not
  // at once: end them here, or the iteration that runs again could find its id still taken.
  await endOpenChildren(client, described, `run ${runId} ended (${execution.toLowerCase()}) and is being continued`);

  const endedInIteration = /^iteration-(\d+)$/.exec(stageAttribute(described) ?? '')?.[1];
  const earlier = Array.isArray(memo.resumes) ? (memo.resumes as RunResume[]) : [];
  const resume: RunResume = {
    fromIteration,
    policyVersion: progress?.policyVersion ?? input.base.version,
    startOver,
    previousExecutionRunId: described.runId,
    previousStatus: execution,
    reason: failed ?? (await closeReason(handle)),
    progressFrom: 'query',
    at: new Date().toISOString(),
  };
  const executionRunId = await startContinuation(client, runId, { taskQueue, input, progress, memo, earlier, resume });
  return {
    ...resume,
    runId,
    taskQueue,
    endedInIteration: endedInIteration === undefined ? undefined : Number(endedInIteration),
    executionRunId,
    iterations: input.iterations,
    resumes: earlier.length + 1,
  };
}

/**
 * The run's execution, described, when it ended in a way a continuation can follow; refused for a
 * missing run, another workflow type, a running (or paused) run and a completed one.
 */
async function endedExecution(
  client: Client,
  runId: string,
): Promise<{ described: WorkflowExecutionDescription; handle: WorkflowHandle<typeof trainingRun> }> {
  let described;
  try {
    described = await client.workflow.getHandle(runId).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new RunNotFoundError(`no run named ${runId}; \`rein runs\` lists the runs`);
    throw new Error(`cannot describe run ${runId}: ${failureMessage(err)}`, { cause: err });
  }
  if (described.type !== 'trainingRun')
    throw new RunNotResumableError(`${runId} is not a training run (its workflow type is ${described.type})`);
  const execution = described.status.name;
  // The execution described, not whichever is latest by the time we ask again.
  const handle = client.workflow.getHandle<typeof trainingRun>(runId, described.runId);
  if (execution === 'RUNNING' || execution === 'PAUSED' || execution === 'CONTINUED_AS_NEW') {
    throw new RunNotResumableError(
      `run ${runId} is still running: there is nothing to continue. A paused run goes on with \`rein resume ${runId}\` (the resume signal); \`rein status ${runId}\` shows where it is.`,
    );
  }
  if (execution === 'COMPLETED') {
    const final = (await handle.result().catch(() => undefined)) as RunStatus | undefined;
    throw new RunNotResumableError(completedRunMessage(runId, final));
  }
  return { described, handle };
}

/**
 * Where the new execution starts: the first unfinished iteration of the progress recorded by the
 * ended execution, or (ended before it recorded any) given to it by the one before; with none
 * recorded the run starts over. `failed`: why the iteration that runs again failed, if it did.
 */
function continuationPoint(
  described: WorkflowExecutionDescription,
  input: TrainingRunInput,
): { progress: RunProgress | undefined; fromIteration: number; startOver: boolean; failed: string | undefined } {
  const recorded = recordedProgress(described) ?? input.progress;
  const fromIteration = recorded?.nextIteration ?? 1;
  // The iteration that ended the run runs again: its `failed` entry goes, or the status would list it twice.
  const failedEntry = recorded?.iterations.find((i) => i.iteration === fromIteration && i.failed);
  const progress: RunProgress | undefined = recorded && {
    ...recorded,
    iterations: recorded.iterations.filter((i) => i.iteration < fromIteration),
  };
  return { progress, fromIteration, startOver: recorded === undefined, failed: failedEntry?.failed };
}

/**
 * Starts the new execution under the run's id; its memo keeps the old one's, less its progress, plus this continuation.
 */
async function startContinuation(
  client: Client,
  runId: string,
  start: {
    taskQueue: string;
    input: TrainingRunInput;
    progress: RunProgress | undefined;
    memo: Record<string, unknown>;
    earlier: RunResume[];
    resume: RunResume;
  },
): Promise<string> {
  const { taskQueue, input, progress, memo, earlier, resume } = start;
  const { progress: _closed, ...kept } = memo;
  try {
    const started = await client.workflow.start<typeof trainingRun>('trainingRun', {
      taskQueue,
      workflowId: runId,
      // Only a run that did not complete may be started again under its id.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      args: [progress ? { ...input, progress } : input],
      // The progress it starts from is its record until it records its own; `resumes` keeps the last ten continuations.
      memo: { ...kept, ...(progress && { progress }), resumes: [...earlier, resume].slice(-10) },
      staticSummary: `Rein training run ${runId}, continued from iteration ${resume.fromIteration} with ${resume.policyVersion} after it ${resume.previousStatus.toLowerCase()}`,
    });
    return started.firstExecutionRunId;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      throw new RunNotResumableError(
        `run ${runId} was started again meanwhile (another \`rein resume\`?); \`rein status ${runId}\` shows it`,
      );
    }
    throw err;
  }
}

/** What `rein resume` says about a completed run: nothing to resume, and how to go on from it. */
export function completedRunMessage(runId: string, final: RunStatus | undefined): string {
  const how =
    final?.state === 'stopped'
      ? ` (stopped after ${final.iterations.length === 1 ? 'one iteration' : `${final.iterations.length} iterations`})`
      : '';
  const fromLast = final
    ? `; to go on from this run's last policy, \`rein promote ${final.policyVersion}\` first (it needs a passing gate decision, or --override)`
    : '';
  return (
    `run ${runId} completed${how}: there is nothing to resume. To train on, start a new run: ` +
    `\`rein train\` starts from what production serves (run.startFrom: production, the default)${fromLast}.`
  );
}

/** The input and task queue a closed execution was started with: the first event of its history, and only that. */
async function startedWith(
  client: Client,
  described: WorkflowExecutionDescription,
): Promise<{ input: TrainingRunInput; taskQueue: string }> {
  const { history } = await client.workflowService.getWorkflowExecutionHistory({
    namespace: client.options.namespace,
    execution: { workflowId: described.workflowId, runId: described.runId },
    maximumPageSize: 1,
  });
  const started = history?.events?.[0]?.workflowExecutionStartedEventAttributes;
  const payload = started?.input?.payloads?.[0];
  if (!payload)
    throw new Error(`run ${described.workflowId}: execution ${described.runId} has no input to start it again from`);
  return {
    input: defaultPayloadConverter.fromPayload<TrainingRunInput>(payload),
    taskQueue: started?.taskQueue?.name || described.taskQueue,
  };
}

/**
 * Terminates the child workflows a closed execution left open (Temporal still lists them as its
 * pending children) that still run, and theirs.
 */
async function endOpenChildren(
  client: Client,
  described: WorkflowExecutionDescription,
  reason: string,
  depth = 0,
): Promise<void> {
  if (depth > 3) return;
  for (const pending of described.raw.pendingChildren ?? []) {
    if (!pending.workflowId || !pending.runId) continue;
    const child = client.workflow.getHandle(pending.workflowId, pending.runId);
    try {
      const state = await child.describe();
      if (state.status.name === 'RUNNING') await child.terminate(reason);
      await endOpenChildren(client, state, reason, depth + 1);
    } catch (err) {
      // Ended meanwhile (its parent-close policy got there first), or no longer kept.
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
}

/** Why a closed execution ended: the innermost message of its failure, a termination's reason. */
async function closeReason(handle: ReturnType<Client['workflow']['getHandle']>): Promise<string> {
  try {
    await handle.result();
    return 'ended';
  } catch (err) {
    if (isTemporalUnreachable(err) || !(err instanceof WorkflowFailedError)) throw err;
    const { cause } = err;
    if (cause instanceof TerminatedFailure)
      return cause.message === 'Workflow execution terminated' ? 'terminated' : cause.message;
    if (cause instanceof TimeoutFailure) return 'timed out';
    if (cause instanceof CancelledFailure) return 'cancelled';
    let innermost: Error | undefined = cause;
    while (innermost?.cause instanceof Error) innermost = innermost.cause;
    return innermost?.message || 'failed';
  }
}

/**
 * Resumes a run however it stands: a running (paused) run gets the resume signal; one that failed,
 * was terminated, cancelled or timed out is continued from its first unfinished iteration
 * (continueRun); a completed one is refused (RunNotResumableError).
 */
export async function resumeRun(
  client: Client,
  runId: string,
  options: { allowConcurrentPromotion?: boolean } = {},
): Promise<{ action: 'signalled' } | { action: 'continued'; continuation: RunContinuation }> {
  if ((await runExecutionStatus(client, runId)) === 'RUNNING') {
    await signalRun(client, runId, 'resume');
    return { action: 'signalled' };
  }
  return { action: 'continued', continuation: await continueRun(client, runId, options) };
}
