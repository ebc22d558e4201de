import { randomBytes } from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import proto from '@temporalio/proto';
import { ConfigError } from '../config/load.js';
import type { ReinConfig, RunSettings } from '../config/schema.js';
import { configHash } from '../config/config-hash.js';
import { loadTaskSet } from '../rollouts/tasks.js';
import { pauseSignal, resumeSignal, statusQuery, stopSignal, type RunStatus, type TrainingIterationInput, type TrainingRunInput, type trainingRun } from '../../workflows/index.js';

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

/** Starts a training run; its workflow id is the run id. */
export async function startRun(client: Client, taskQueue: string, input: RunStart): Promise<{ runId: string; executionRunId: string }> {
  try {
    const handle = await client.workflow.start<typeof trainingRun>('trainingRun', {
      taskQueue,
      workflowId: input.runId,
      // A run id names one run: its candidates and rollouts are named after it.
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      args: [input],
      memo: { configHash: input.configHash },
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

/** The newest training runs first, from Temporal's visibility store. */
export async function listRuns(client: Client, limit = 20): Promise<RunListing[]> {
  const runs: RunListing[] = [];
  const query = `WorkflowType = 'trainingRun' AND ExecutionStatus != 'ContinuedAsNew'`;
  for await (const wf of client.workflow.list({ query, pageSize: Math.min(limit, 100) })) {
    const attribute = (name: string) => (wf.searchAttributes[name] as string[] | undefined)?.[0];
    runs.push({
      runId: attribute('ReinRunId') ?? wf.workflowId,
      execution: wf.status.name,
      startTime: wf.startTime,
      closeTime: wf.closeTime,
      stage: attribute('ReinStage'),
      policyVersion: attribute('ReinPolicyVersion'),
    });
    if (runs.length >= limit) break;
  }
  return runs;
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
  return { runId, execution, startTime: described.startTime, closeTime: described.closeTime, status, problem, activity };
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
  const beat = payload ? (defaultPayloadConverter.fromPayload(payload) as { done?: number; total?: number } | undefined) : undefined;
  return {
    workflowId,
    stage: (described.searchAttributes.ReinStage as string[] | undefined)?.[0],
    type: pending.activityType?.name ?? 'activity',
    attempt: pending.attempt ?? 1,
    done: beat?.done,
    total: beat?.total,
    lastFailure: pending.lastFailure?.message ?? undefined,
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
