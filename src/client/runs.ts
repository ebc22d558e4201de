import { randomBytes } from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import proto from '@temporalio/proto';
import { ConfigError } from '../config/load.js';
import type { ReinConfig, RunSettings } from '../config/schema.js';
import { configHash } from '../config/config-hash.js';
import { PRODUCTION_ALIAS } from '../registry/promotion.js';
import { loadTaskSet } from '../rollouts/tasks.js';
import { storeIdentity, storeLocation } from '../store/location.js';
import type { RunRolloutsInput, RunRolloutsSummary } from '../../activities/run-rollouts.js';
import {
  pauseSignal,
  resumeSignal,
  statusQuery,
  stopSignal,
  type RunProgress,
  type RunStatus,
  type TrainingIterationInput,
  type TrainingIterationResult,
  type TrainingRunInput,
  type trainingRun,
} from '../../workflows/index.js';
import { heldoutResult, iterationEntry, productionHeldout } from '../../workflows/training-run.js';

/** What the command line may change about the config's `run` section. */
export interface RunOverrides {
  runId?: string | undefined;
  iterations?: number | null | undefined;
  tasksPerIteration?: number | undefined;
  samplesPerTask?: number | undefined;
  heldoutLimit?: number | undefined;
}

export type RunStart = TrainingRunInput & { runId: string };

/** A run id that sorts by start time and does not collide: run-20261201-0531-a3f9. */
/**
 * What a run id may be. It names the run's workflows, its policy versions (`<run>.v<n>`) and its
 * rollouts (`<run>.it<n>.<task>.<sample>`, at most 128 characters), so it is short and plain.
 */
export const RUN_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const RUN_ID_RULE = '1 to 64 letters, digits, dots, dashes and underscores, starting with a letter or digit';

export function newRunId(now = new Date()): string {
  const stamp = now.toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '-');
  return `run-${stamp}-${randomBytes(2).toString('hex')}`;
}

/**
 * The config's held-out tasks (the first `limit`, default run.heldoutLimit), pinned by content
 * hash, with the harness's eval settings; undefined when the config names none.
 */
export function heldoutSelection(run: RunSettings, limit = run.heldoutLimit): TrainingIterationInput['heldout'] {
  if (!run.heldoutTasks) return undefined;
  const heldout = loadTaskSet(run.heldoutTasks);
  return {
    taskSet: { file: heldout.file, sha256: heldout.sha256 },
    taskIds: heldout.tasks.slice(0, limit ?? heldout.tasks.length).map((t) => t.id),
    ...(Object.keys(run.evalHarnessEnv).length > 0 && { harnessEnv: run.evalHarnessEnv }),
  };
}

/**
 * The trainingRun input from the config (and command-line overrides): task sets pinned by their
 * content hash, the base policy, sizes. Only references travel: the tasks stay in their files.
 */
export function trainingRunInput(config: ReinConfig, overrides: RunOverrides = {}, source = 'config'): TrainingRunInput {
  const run = { ...config.run };
  if (overrides.iterations !== undefined) run.iterations = overrides.iterations;
  if (overrides.tasksPerIteration !== undefined) run.tasksPerIteration = overrides.tasksPerIteration;
  if (overrides.samplesPerTask !== undefined) run.samplesPerTask = overrides.samplesPerTask;
  if (overrides.heldoutLimit !== undefined) run.heldoutLimit = overrides.heldoutLimit;
  const see = 'see examples/calculator-agent/rein.yaml for a complete example';
  const problems = [
    !config.harness && `harness: not set; expected the program Rein runs on each task (${see})`,
    !config.verifier && `verifier: not set; expected the program that scores a harness run (${see})`,
    !run.trainTasks && `run.trainTasks: not set; expected a JSONL task set to train on (${see})`,
  ].filter((p): p is string => typeof p === 'string');
  if (problems.length > 0) throw new ConfigError(source, problems);
  const train = loadTaskSet(run.trainTasks as string);
  if (run.tasksPerIteration > train.tasks.length) {
    // Taking the same task twice in one iteration would only repeat its group.
    throw new ConfigError(source, [`run.tasksPerIteration (or --tasks): ${run.tasksPerIteration} is more than the ${train.tasks.length} tasks in ${train.file}; use at most ${train.tasks.length}`]);
  }
  const heldout = heldoutSelection(run);
  return {
    ...(overrides.runId && { runId: overrides.runId }),
    configHash: configHash(config),
    base: { version: run.base.version, checkpointUri: run.base.checkpoint as string },
    startFrom: run.startFrom,
    iterations: run.iterations,
    train: { taskSet: { file: train.file, sha256: train.sha256 }, taskIds: train.tasks.map((t) => t.id), tasksPerIteration: run.tasksPerIteration, samplesPerTask: run.samplesPerTask },
    ...(heldout && { heldout }),
    heldoutEvery: run.heldoutEvery,
    release: { samplesPerTask: config.gate.samplesPerTask, promote: config.gate.autoPromote },
    heartbeatTimeoutSeconds: run.heartbeatTimeoutSeconds,
    onFailedIteration: run.onFailedIteration,
    maxIterationTries: run.maxIterationTries,
  };
}

export class RunNotFoundError extends Error {}
export class RunExistsError extends Error {}
/** Another running run promotes into the same alias of the same store. */
export class PromotionConflictError extends Error {}

/**
 * Which production a run may move: its store and alias, kept in the run's memo (`promotes`) so
 * that the next start can see it. Two runs gating into one alias at once would each measure
 * their candidate against a production the other may move.
 */
export interface PromotionGuard {
  /** storeIdentity() of the store whose alias the run moves. */
  store: string;
  /** Start even when another running run promotes into the same alias (config gate.concurrentRuns: allow). */
  allowConcurrent: boolean;
}

export function promotionGuard(config: ReinConfig): PromotionGuard {
  return { store: storeIdentity(storeLocation(config)), allowConcurrent: config.gate.concurrentRuns === 'allow' };
}

/** The memo entry that says what a run promotes into: none for a run that does not promote. */
export function promotionMemo(input: Pick<TrainingRunInput, 'release'>, guard: PromotionGuard | undefined): { promotes?: string } {
  return guard && input.release?.promote ? { promotes: `${PRODUCTION_ALIAS} of ${guard.store}` } : {};
}

/**
 * Refuses a start while another run promotes into the same alias. Read from Temporal's visibility
 * store, which may lag a start by a moment: two starts at the same instant can both pass, and then
 * the promotion's compare-and-set (the alias moves only from where the gate measured it) still
 * keeps the second from overwriting the first.
 */
async function refuseConcurrentPromotion(client: Client, runId: string, promotes: string): Promise<void> {
  const query = `WorkflowType = 'trainingRun' AND ExecutionStatus = 'Running'`;
  for await (const wf of client.workflow.list({ query, pageSize: 100 })) {
    if (wf.workflowId === runId || wf.memo?.promotes !== promotes) continue;
    throw new PromotionConflictError(
      `run ${wf.workflowId} (started ${wf.startTime.toISOString()}) is still running and promotes into ${promotes}; two runs gating into one alias at once would each judge ` +
        `their candidate against a production the other may move. Wait for it (\`rein status ${wf.workflowId}\`), stop it (\`rein stop ${wf.workflowId}\` or \`rein cancel ${wf.workflowId}\`), ` +
        `start this one with gate.autoPromote: false, or set gate.concurrentRuns: allow`,
    );
  }
}

/**
 * Starts a training run; its workflow id is the run id. With a guard, a run that promotes is
 * refused while another run promotes into the same alias (PromotionConflictError).
 */
export async function startRun(client: Client, taskQueue: string, input: RunStart, guard?: PromotionGuard): Promise<{ runId: string; executionRunId: string }> {
  const { promotes } = promotionMemo(input, guard);
  if (promotes && !guard?.allowConcurrent) await refuseConcurrentPromotion(client, input.runId, promotes);
  try {
    const handle = await client.workflow.start<typeof trainingRun>('trainingRun', {
      taskQueue,
      workflowId: input.runId,
      // A run id names one run: its candidates and rollouts are named after it.
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      args: [input],
      memo: { configHash: input.configHash, ...(promotes && { promotes }) },
      staticSummary: `Rein training run ${input.runId}: ${input.iterations ?? 'unbounded'} iterations from ${input.base.version}`,
    });
    return { runId: input.runId, executionRunId: handle.firstExecutionRunId };
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      throw new RunExistsError(`a run named ${input.runId} already exists; follow it with \`rein status ${input.runId}\`, or choose another --run-id`);
    }
    throw err;
  }
}

export interface RunListing {
  runId: string;
  /** Temporal's execution status: Running, Completed, Failed, Terminated, Canceled, TimedOut. */
  execution: string;
  startTime: Date;
  closeTime: Date | undefined;
  stage: string | undefined;
  policyVersion: string | undefined;
}

/**
 * The newest training runs first (by start), from Temporal's visibility store. The store lists
 * open executions first and closed ones by close time, and its SQL flavours take no ORDER BY:
 * all runs are read and sorted here.
 */
export async function listRuns(client: Client, limit = 20): Promise<RunListing[]> {
  const runs: RunListing[] = [];
  const query = `WorkflowType = 'trainingRun' AND ExecutionStatus != 'ContinuedAsNew'`;
  for await (const wf of client.workflow.list({ query, pageSize: 100 })) {
    const attribute = (name: string) => (wf.searchAttributes[name] as string[] | undefined)?.[0];
    runs.push({
      runId: attribute('ReinRunId') ?? wf.workflowId,
      execution: wf.status.name,
      startTime: wf.startTime,
      closeTime: wf.closeTime,
      stage: attribute('ReinStage'),
      policyVersion: attribute('ReinPolicyVersion'),
    });
  }
  return runs.sort((a, b) => b.startTime.getTime() - a.startTime.getTime()).slice(0, limit);
}

export interface RunReport {
  runId: string;
  execution: string;
  startTime: Date;
  closeTime: Date | undefined;
  /** The run's own account (query or result); absent when neither could be had. */
  status: RunStatus | undefined;
  /** Why the run failed or why its status could not be read. */
  problem: string | undefined;
  /** What the current stage is doing: its activity and heartbeat progress. */
  activity: StageActivity | undefined;
  /** Each time the run was continued after its execution ended, oldest first (the memo keeps ten). */
  resumes: RunResume[];
}

export interface StageActivity {
  workflowId: string;
  /** That workflow's ReinStage (rollouts, batch, update, heldout, heldout-base, release-replay, gate, promote). */
  stage: string | undefined;
  type: string;
  attempt: number;
  done: number | undefined;
  total: number | undefined;
  lastFailure: string | undefined;
  /** What the stage waits for before it goes on (a gateway or backend not answering). */
  waiting: string | undefined;
}

/**
 * The run's state as Temporal and the run itself report it. Throws when Temporal cannot be asked
 * (see isTemporalUnreachable), so that a caller never takes a lost connection for the run's state.
 */
export async function describeRun(client: Client, runId: string): Promise<RunReport> {
  const handle = client.workflow.getHandle<typeof trainingRun>(runId);
  let described;
  try {
    described = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new RunNotFoundError(`no run named ${runId}; \`rein runs\` lists the runs`);
    // The SDK's own message ("Failed to describe workflow") leaves out the reason, which is in its cause.
    throw new Error(`cannot describe run ${runId}: ${failureMessage(err)}`, { cause: err });
  }
  const execution = described.status.name;
  let status: RunStatus | undefined;
  let problem: string | undefined;
  try {
    status = execution === 'COMPLETED' ? await handle.result() : await handle.query(statusQuery);
  } catch (err) {
    // A query that runs out of time may only mean that no worker answers; a refused connection is Temporal's.
    if (execution === 'COMPLETED' ? isTemporalUnreachable(err) : grpcCode(err) === UNAVAILABLE) throw err;
    problem = failureMessage(err);
  }
  if (execution === 'FAILED' || execution === 'TERMINATED' || execution === 'CANCELLED' || execution === 'TIMED_OUT') {
    try {
      await handle.result();
    } catch (err) {
      if (isTemporalUnreachable(err)) throw err;
      problem = failureMessage(err);
    }
  }
  const activity = execution === 'RUNNING' && status ? await describeStage(client, status.currentWorkflowId ?? runId) : undefined;
  const resumes = Array.isArray(described.memo?.resumes) ? (described.memo.resumes as RunResume[]) : [];
  return { runId, execution, startTime: described.startTime, closeTime: described.closeTime, status, problem, activity, resumes };
}

/** The running activity of a workflow (the run itself or its current iteration) and its heartbeat. */
export async function describeStage(client: Client, workflowId: string): Promise<StageActivity | undefined> {
  let described;
  try {
    described = await client.workflow.getHandle(workflowId).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
  const { raw } = described;
  const pending = raw.pendingActivities?.[0];
  if (!pending) {
    // The stage's work may be in a child (an iteration's release): follow it down.
    const child = raw.pendingChildren?.[0]?.workflowId;
    return child ? describeStage(client, child) : undefined;
  }
  const payload = pending.heartbeatDetails?.payloads?.[0];
  const beat = payload ? (defaultPayloadConverter.fromPayload(payload) as { done?: number; total?: number; waiting?: string } | undefined) : undefined;
  return {
    workflowId,
    stage: (described.searchAttributes.ReinStage as string[] | undefined)?.[0],
    type: pending.activityType?.name ?? 'activity',
    attempt: pending.attempt ?? 1,
    done: beat?.done,
    total: beat?.total,
    lastFailure: pending.lastFailure?.message ?? undefined,
    waiting: beat?.waiting,
  };
}

export async function signalRun(client: Client, runId: string, signal: 'pause' | 'resume' | 'stop'): Promise<void> {
  const definition = { pause: pauseSignal, resume: resumeSignal, stop: stopSignal }[signal];
  try {
    await client.workflow.getHandle(runId).signal(definition);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new RunNotFoundError(`no running run named ${runId}; \`rein runs\` lists the runs`);
    throw err;
  }
}

/**
 * Cancels a run: Temporal cancels its current iteration and that iteration's running activity
 * (rollouts, the update), and the run ends CANCELLED. Waits for that when a worker polls the
 * task queue ('cancelled'); otherwise the request waits for one ('requested').
 */
export async function cancelRun(client: Client, runId: string, taskQueue: string): Promise<'cancelled' | 'requested'> {
  const handle = client.workflow.getHandle(runId);
  try {
    const { status } = await handle.describe();
    if (status.name !== 'RUNNING') throw new RunNotFoundError(`run ${runId} is not running (it ${status.name === 'CANCELLED' ? 'was cancelled' : status.name.toLowerCase().replace('_', ' ')}); \`rein status ${runId}\` shows it`);
    await handle.cancel();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new RunNotFoundError(`no running run named ${runId}; \`rein runs\` lists the runs`);
    throw err;
  }
  if (!(await workerIsPolling(client, taskQueue))) return 'requested';
  try {
    await handle.result();
  } catch (err) {
    if (isTemporalUnreachable(err)) throw err;
  }
  const { status } = await handle.describe();
  if (status.name !== 'CANCELLED') throw new Error(`run ${runId} did not end cancelled: it ${status.name.toLowerCase()}; \`rein status ${runId}\` says why`);
  return 'cancelled';
}

/** The run cannot be continued as asked (still running, completed, or started again meanwhile); the message says what to do. */
export class RunNotResumableError extends Error {}

/** One entry of a run's memo `resumes`: a closed execution continued as a new one with the same id. */
export interface RunResume {
  /** The iteration the new execution starts at (1 with `startOver`). */
  fromIteration: number;
  policyVersion: string;
  /** The run never got past its start (base registration, held-out replay of the base): it starts over. */
  startOver: boolean;
  previousExecutionRunId: string;
  /** Temporal's status of the closed execution: FAILED, TERMINATED, TIMED_OUT or CANCELLED. */
  previousStatus: string;
  reason: string;
  progressFrom: 'query' | 'history';
  at: string;
}

export interface RunContinuation extends RunResume {
  runId: string;
  taskQueue: string;
  /** The iteration the closed execution was in when it ended (from its ReinStage), if it was in one. */
  endedInIteration: number | undefined;
  /** Why the status query was not used, when the progress was rebuilt from the history. */
  queryProblem: string | undefined;
  /** The new execution. */
  executionRunId: string;
  iterations: number | null;
  /** How many times this run has been continued, this time included. */
  resumes: number;
}

/** How long continueRun waits for a worker to answer the status query of a closed run. */
const STATUS_QUERY_TIMEOUT_MS = 30_000;

/**
 * Continues a run whose execution failed, was terminated, timed out or was cancelled: a new
 * execution with the same workflow id (the run id), on the same task queue, with the run's original
 * input and its progress, so that it skips the base registration and the base's held-out replay and
 * starts at the first unfinished iteration from the last policy that iteration trained (a failed
 * iteration runs again; its finished rollouts are reused, since batch ids are per iteration).
 *
 * The progress is the run's own account: its `status` query, answered by a worker replaying the
 * closed execution. When no worker answers (none polls, or the replay fails, e.g. after an
 * incompatible code change), it is rebuilt from the execution's history instead (the input's
 * progress, then each finished iteration's child result: see progressFromHistory). A run that
 * never reached its first iteration starts over with its original input.
 *
 * Refused (RunNotResumableError) for a running run (a paused one is resumed by signal) and a
 * completed one. The memo's `resumes` records each continuation.
 */
export async function continueRun(client: Client, runId: string, options: { queryTimeoutMs?: number; allowConcurrentPromotion?: boolean } = {}): Promise<RunContinuation> {
  let described;
  try {
    described = await client.workflow.getHandle(runId).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new RunNotFoundError(`no run named ${runId}; \`rein runs\` lists the runs`);
    throw new Error(`cannot describe run ${runId}: ${failureMessage(err)}`, { cause: err });
  }
  if (described.type !== 'trainingRun') throw new RunNotResumableError(`${runId} is not a training run (its workflow type is ${described.type})`);
  const execution = described.status.name;
  // The execution described, not whichever is latest by the time we ask again.
  const handle = client.workflow.getHandle<typeof trainingRun>(runId, described.runId);
  if (execution === 'RUNNING' || execution === 'PAUSED' || execution === 'CONTINUED_AS_NEW') {
    throw new RunNotResumableError(`run ${runId} is still running: there is nothing to continue. A paused run goes on with \`rein resume ${runId}\` (the resume signal); \`rein status ${runId}\` shows where it is.`);
  }
  if (execution === 'COMPLETED') {
    const final = (await handle.result().catch(() => undefined)) as RunStatus | undefined;
    throw new RunNotResumableError(completedRunMessage(runId, final));
  }

  const memo = (described.memo ?? {}) as Record<string, unknown>;
  if (typeof memo.promotes === 'string' && !options.allowConcurrentPromotion) await refuseConcurrentPromotion(client, runId, memo.promotes);

  const history = await handle.fetchHistory();
  const startedEvent = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  const inputPayload = startedEvent?.input?.payloads?.[0];
  if (!inputPayload) throw new Error(`run ${runId}: the history of execution ${described.runId} has no input to start it again from`);
  const input = defaultPayloadConverter.fromPayload<TrainingRunInput>(inputPayload);
  const taskQueue = startedEvent?.taskQueue?.name || described.taskQueue;

  let progress: RunProgress;
  let startOver: boolean;
  let progressFrom: RunResume['progressFrom'];
  let queryProblem: string | undefined;
  const fromQuery = await queryClosedRun(client, handle, taskQueue, options.queryTimeoutMs ?? STATUS_QUERY_TIMEOUT_MS);
  if ('status' in fromQuery) {
    const { runId: _r, state: _s, stage, currentWorkflowId: _c, ...rest } = fromQuery.status;
    progress = rest;
    startOver = !input.progress && (stage === 'starting' || stage === 'heldout-base');
    progressFrom = 'query';
  } else {
    ({ progress, startOver } = progressFromHistory(input, history));
    progressFrom = 'history';
    queryProblem = fromQuery.problem;
  }
  const fromIteration = startOver ? 1 : progress.nextIteration;
  // The iteration that ended the run runs again: its `failed` entry goes, or the status would list it twice.
  const failedEntry = progress.iterations.find((i) => i.iteration === fromIteration && i.failed);
  progress = { ...progress, iterations: progress.iterations.filter((i) => i.iteration < fromIteration) };

  // Children a terminated or timed-out run leaves are ended by their parent-close policy, but not
  // at once: end them here, or the iteration that runs again could find its id still taken.
  await endOpenChildren(client, history, `run ${runId} ended (${execution.toLowerCase()}) and is being continued`);

  const stageAttribute = (described.searchAttributes.ReinStage as string[] | undefined)?.[0];
  const endedInIteration = /^iteration-(\d+)$/.exec(stageAttribute ?? '')?.[1];
  const earlier = Array.isArray(memo.resumes) ? (memo.resumes as RunResume[]) : [];
  const resume: RunResume = {
    fromIteration,
    policyVersion: startOver ? input.base.version : progress.policyVersion,
    startOver,
    previousExecutionRunId: described.runId,
    previousStatus: execution,
    reason: failedEntry?.failed ?? closeReason(history),
    progressFrom,
    at: new Date().toISOString(),
  };
  let started;
  try {
    started = await client.workflow.start<typeof trainingRun>('trainingRun', {
      taskQueue,
      workflowId: runId,
      // Only a run that did not complete may be started again under its id.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      args: [startOver ? input : { ...input, progress }],
      // Kept small: the last ten continuations.
      memo: { ...memo, resumes: [...earlier, resume].slice(-10) },
      staticSummary: `Rein training run ${runId}, continued from iteration ${fromIteration} with ${resume.policyVersion} after it ${execution.toLowerCase()}`,
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      throw new RunNotResumableError(`run ${runId} was started again meanwhile (another \`rein resume\`?); \`rein status ${runId}\` shows it`);
    }
    throw err;
  }
  return {
    ...resume,
    runId,
    taskQueue,
    endedInIteration: endedInIteration === undefined ? undefined : Number(endedInIteration),
    queryProblem,
    executionRunId: started.firstExecutionRunId,
    iterations: input.iterations,
    resumes: earlier.length + 1,
  };
}

/** What `rein resume` says about a completed run: nothing to resume, and how to go on from it. */
export function completedRunMessage(runId: string, final: RunStatus | undefined): string {
  const how = final?.state === 'stopped' ? ` (stopped after ${final.iterations.length === 1 ? 'one iteration' : `${final.iterations.length} iterations`})` : '';
  const fromLast = final ? `; to go on from this run's last policy, \`rein promote ${final.policyVersion}\` first (it needs a passing gate decision, or --override)` : '';
  return (
    `run ${runId} completed${how}: there is nothing to resume. To train on, start a new run: ` +
    `\`rein train\` starts from what production serves (run.startFrom: production, the default)${fromLast}.`
  );
}

/** The status query of a closed run, or why it could not be had (no worker polls, none answered in time, the replay failed). */
async function queryClosedRun(client: Client, handle: ReturnType<Client['workflow']['getHandle']>, taskQueue: string, timeoutMs: number): Promise<{ status: RunStatus } | { problem: string }> {
  if (!(await workerIsPolling(client, taskQueue))) return { problem: `no worker polls task queue "${taskQueue}"` };
  try {
    return { status: await client.withDeadline(Date.now() + timeoutMs, () => handle.query(statusQuery)) };
  } catch (err) {
    // A query that runs out of time means no worker answered; a refused connection is Temporal's.
    if (grpcCode(err) === UNAVAILABLE) throw err;
    return { problem: `the status query failed: ${failureMessage(err)}` };
  }
}

type History = proto.temporal.api.history.v1.IHistory;
type Failure = proto.temporal.api.failure.v1.IFailure;

/**
 * A run's progress rebuilt from the history of one of its closed executions, as the workflow
 * builds it (keep the two in step: the integration test compares them): the input's progress (or
 * a fresh one), then, when the execution started the run, the production version it started from
 * and the base's held-out replay, then each finished iteration's child result. A failed iteration
 * counts only with onFailedIteration `skip` (otherwise it ended the run, and runs again).
 * `startOver`: the execution started the run and never reached an iteration.
 */
export function progressFromHistory(input: TrainingRunInput, history: History): { progress: RunProgress; startOver: boolean } {
  const progress: RunProgress = input.progress ? structuredClone(input.progress) : { nextIteration: 1, policyVersion: input.base.version, iterations: [] };
  const fresh = !input.progress;
  const decode = <T>(payloads: proto.temporal.api.common.v1.IPayloads | null | undefined): T | undefined => {
    const payload = payloads?.payloads?.[0];
    return payload ? defaultPayloadConverter.fromPayload<T>(payload) : undefined;
  };
  const activities = new Map<string, { type: string; input: unknown }>();
  const children = new Map<string, TrainingIterationInput | undefined>();
  let reachedIterations = false;
  let heldoutBase: RunRolloutsSummary | undefined;
  let fromProduction = false;
  const record = (iteration: number) => {
    progress.iterations = progress.iterations.slice(-KEPT_ITERATIONS);
    progress.nextIteration = iteration + 1;
  };
  for (const event of history.events ?? []) {
    const id = String(event.eventId);
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) activities.set(id, { type: scheduled.activityType?.name ?? '', input: decode(scheduled.input) });
    const completed = event.activityTaskCompletedEventAttributes;
    if (completed && fresh && !reachedIterations) {
      const activity = activities.get(String(completed.scheduledEventId));
      if (activity?.type === 'productionPolicy') {
        progress.policyVersion = decode<string>(completed.result) ?? progress.policyVersion;
        fromProduction = true;
      }
      // The base's held-out replay (its last round, when unscored rollouts ran again).
      if (activity?.type === 'runRollouts' && (activity.input as RunRolloutsInput | undefined)?.mode === 'eval') heldoutBase = decode<RunRolloutsSummary>(completed.result);
    }
    const initiated = event.startChildWorkflowExecutionInitiatedEventAttributes;
    if (initiated?.workflowType?.name === 'trainingIteration') {
      if (!reachedIterations && fresh && input.heldout && heldoutBase) {
        const base = heldoutResult(progress.policyVersion, heldoutBase);
        progress.heldout = { base, latest: null, ...(fromProduction && { production: base }) };
      }
      reachedIterations = true;
      children.set(id, decode<TrainingIterationInput>(initiated.input));
    }
    const done = event.childWorkflowExecutionCompletedEventAttributes;
    if (done?.workflowType?.name === 'trainingIteration') {
      const result = decode<TrainingIterationResult>(done.result);
      if (!result) continue;
      progress.policyVersion = result.candidate;
      progress.iterations.push(iterationEntry(result));
      if (progress.heldout && result.heldout) progress.heldout.latest = heldoutResult(result.candidate, result.heldout);
      if (progress.heldout) progress.heldout.production = productionHeldout(result) ?? progress.heldout.production;
      record(result.iteration);
    }
    const ended =
      event.childWorkflowExecutionFailedEventAttributes ??
      event.childWorkflowExecutionCanceledEventAttributes ??
      event.childWorkflowExecutionTimedOutEventAttributes ??
      event.childWorkflowExecutionTerminatedEventAttributes;
    if (ended?.workflowType?.name === 'trainingIteration' && input.onFailedIteration === 'skip') {
      const iteration = children.get(String(ended.initiatedEventId))?.iteration;
      if (iteration === undefined) continue;
      const failure = event.childWorkflowExecutionFailedEventAttributes?.failure;
      progress.iterations.push({ iteration, candidate: null, meanReward: null, heldoutMeanReward: null, failed: innermostMessage(failure) ?? 'failed' });
      record(iteration);
    }
  }
  return { progress, startOver: fresh && !reachedIterations };
}

/** As workflows/training-run.ts keeps them. */
const KEPT_ITERATIONS = 50;

function innermostMessage(failure: Failure | null | undefined): string | undefined {
  let f = failure;
  while (f?.cause) f = f.cause;
  return f?.message ?? undefined;
}

/** Terminates the child workflows a history leaves open (started, not closed) that still run, and theirs. */
async function endOpenChildren(client: Client, history: History, reason: string, depth = 0): Promise<void> {
  if (depth > 3) return;
  const started = new Map<string, { workflowId: string; runId: string }>();
  for (const event of history.events ?? []) {
    const s = event.childWorkflowExecutionStartedEventAttributes;
    if (s?.workflowExecution?.workflowId && s.workflowExecution.runId) started.set(String(s.initiatedEventId), { workflowId: s.workflowExecution.workflowId, runId: s.workflowExecution.runId });
    const closed =
      event.childWorkflowExecutionCompletedEventAttributes ??
      event.childWorkflowExecutionFailedEventAttributes ??
      event.childWorkflowExecutionCanceledEventAttributes ??
      event.childWorkflowExecutionTimedOutEventAttributes ??
      event.childWorkflowExecutionTerminatedEventAttributes;
    if (closed) started.delete(String(closed.initiatedEventId));
  }
  for (const { workflowId, runId } of started.values()) {
    const child = client.workflow.getHandle(workflowId, runId);
    try {
      if ((await child.describe()).status.name === 'RUNNING') await child.terminate(reason);
    } catch (err) {
      // Ended meanwhile (its parent-close policy got there first).
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
    await endOpenChildren(client, await child.fetchHistory(), reason, depth + 1);
  }
}

/** Why a closed execution ended, from its last event. */
function closeReason(history: History): string {
  const last = history.events?.at(-1);
  if (last?.workflowExecutionFailedEventAttributes) return innermostMessage(last.workflowExecutionFailedEventAttributes.failure) ?? 'failed';
  if (last?.workflowExecutionTerminatedEventAttributes) return last.workflowExecutionTerminatedEventAttributes.reason || 'terminated';
  if (last?.workflowExecutionTimedOutEventAttributes) return 'timed out';
  if (last?.workflowExecutionCanceledEventAttributes) return 'cancelled';
  return 'ended';
}

/**
 * Resumes a run however it stands: a running (paused) run gets the resume signal; one that failed,
 * was terminated, cancelled or timed out is continued from its first unfinished iteration
 * (continueRun); a completed one is refused (RunNotResumableError).
 */
export async function resumeRun(client: Client, runId: string, options: { allowConcurrentPromotion?: boolean } = {}): Promise<{ action: 'signalled' } | { action: 'continued'; continuation: RunContinuation }> {
  if ((await runExecutionStatus(client, runId)) === 'RUNNING') {
    await signalRun(client, runId, 'resume');
    return { action: 'signalled' };
  }
  return { action: 'continued', continuation: await continueRun(client, runId, options) };
}

/** Temporal's status of a run's latest execution (RUNNING, COMPLETED, FAILED, TERMINATED, ...). */
export async function runExecutionStatus(client: Client, runId: string): Promise<string> {
  try {
    return (await client.workflow.getHandle(runId).describe()).status.name;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new RunNotFoundError(`no run named ${runId}; \`rein runs\` lists the runs`);
    throw err;
  }
}

/**
 * Whether a worker polls the task queue for workflows (else a started run would wait). Temporal
 * remembers pollers for minutes; one seen in the last 90 s (a long poll lasts 60 s) counts.
 */
export async function workerIsPolling(client: Client, taskQueue: string): Promise<boolean> {
  const response = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue, kind: proto.temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  const recent = Date.now() / 1000 - 90;
  return (response.pollers ?? []).some((p) => Number(p.lastAccessTime?.seconds ?? 0) >= recent);
}

const DEADLINE_EXCEEDED = 4;
const UNAVAILABLE = 14;

/**
 * True when a call failed because Temporal could not be reached or did not answer in time (gRPC
 * UNAVAILABLE or DEADLINE_EXCEEDED anywhere in the cause chain), not because of what was asked.
 */
export function isTemporalUnreachable(err: unknown): boolean {
  const code = grpcCode(err);
  return code === UNAVAILABLE || code === DEADLINE_EXCEEDED;
}

/** The gRPC status code of the first error in the cause chain that has one. */
function grpcCode(err: unknown): number | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    const { code } = e as { code?: unknown };
    if (typeof code === 'number') return code;
  }
  return undefined;
}

function failureMessage(err: unknown): string {
  let e = err as Error | undefined;
  const parts: string[] = [];
  while (e) {
    if (e.message && !parts.includes(e.message)) parts.push(e.message);
    e = e.cause as Error | undefined;
  }
  return parts.join(': ') || String(err);
}
