import { WorkflowNotFoundError, type Client, type WorkflowExecutionDescription } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import proto from '@temporalio/proto';
import {
  PROGRESS_MEMO,
  SHARDS_MEMO,
  type ShardedProgress,
  statusQuery,
  type RunProgress,
  type ClosedRunState,
  type RunStatus,
  type trainingRun,
} from '../../workflows/index.js';
import {
  FAILED_PRECONDITION,
  failureMessage,
  grpcCode,
  isTemporalUnreachable,
  RunNotFoundError,
  UNAVAILABLE,
} from './run-errors.js';

export interface RunReport {
  runId: string;
  execution: string;
  startTime: Date;
  closeTime: Date | undefined;
  /**
   * The run's own account: its result once completed, its status query while it runs, else (closed
   * without completing, or no worker answers) the progress it recorded in its memo. Absent when
   * none of these could be had (a run that never reached its first iteration records none).
   */
  status: RunStatus | undefined;
  /** Why the run failed, or why its status query went unanswered. */
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
 * One entry of a run's memo `resumes`: a closed execution continued as a new one with the same id (continue-run.ts).
 */
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
  /**
   * Where the progress came from. Always `query` now: the run's own account of its progress (its
   * status, as it records it in its memo). `history`: rebuilt from the execution's history, which
   * Rein no longer does; earlier continuations may say so.
   */
  progressFrom: 'query' | 'history';
  at: string;
}

/** How long describeRun waits for a worker to answer a running run's status query. */
const STATUS_QUERY_TIMEOUT_MS = 10_000;

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
    if (err instanceof WorkflowNotFoundError)
      throw new RunNotFoundError(`no run named ${runId}; \`rein runs\` lists the runs`);
    // The SDK's own message ("Failed to describe workflow") leaves out the reason, which is in its cause.
    throw new Error(`cannot describe run ${runId}: ${failureMessage(err)}`, { cause: err });
  }
  const execution = described.status.name;
  let status: RunStatus | undefined;
  let problem: string | undefined;
  if (execution === 'RUNNING') {
    const answer = await queryStatus(client, runId, described.taskQueue);
    status = 'status' in answer ? answer.status : recordedStatus(runId, described);
    if ('problem' in answer)
      problem = `${answer.problem}; ${status ? 'showing the progress the run last recorded' : 'the run has recorded no progress yet'}`;
  } else {
    // A closed run's final account: its result once completed, else the progress it recorded; and why it ended.
    try {
      const result = await handle.result();
      if (execution === 'COMPLETED') status = result;
    } catch (err) {
      if (isTemporalUnreachable(err)) throw err;
      problem = failureMessage(err);
    }
    status ??= recordedStatus(runId, described);
  }
  const activity =
    execution === 'RUNNING' && status ? await describeStage(client, status.currentWorkflowId ?? runId) : undefined;
  const resumes = Array.isArray(described.memo?.resumes) ? (described.memo.resumes as RunResume[]) : [];
  return {
    runId,
    execution,
    startTime: described.startTime,
    closeTime: described.closeTime,
    status,
    problem,
    activity,
    resumes,
  };
}

/** The status query's answer, or why there is none (no worker polls, none answered in time, the replay failed). */
async function queryStatus(
  client: Client,
  runId: string,
  taskQueue: string,
): Promise<{ status: RunStatus } | { problem: string }> {
  if (!(await workerIsPolling(client, taskQueue))) return { problem: unansweredQuery(taskQueue) };
  try {
    const status = await client.withDeadline(Date.now() + STATUS_QUERY_TIMEOUT_MS, () =>
      client.workflow.getHandle<typeof trainingRun>(runId).query(statusQuery),
    );
    return { status };
  } catch (err) {
    // A query that runs out of time may only mean that no worker answers; a refused connection is Temporal's.
    if (grpcCode(err) === UNAVAILABLE) throw err;
    return { problem: unansweredQuery(taskQueue, err) };
  }
}

/**
 * Why a run's status query has no answer, in words: no worker polls its task queue (Rein's own check found none, or
 * Temporal refused the query for it: a worker that stopped moments ago still looks recent), or the query's own failure.
 */
export function unansweredQuery(taskQueue: string, err?: unknown): string {
  const noPoller = grpcCode(err) === FAILED_PRECONDITION && /no poller/i.test(failureMessage(err));
  if (err === undefined || noPoller)
    return `no Rein worker is polling task queue "${taskQueue}": start one with \`rein worker\` (or \`rein dev\`) and the run's config`;
  return `the status query went unanswered: ${failureMessage(err)}`;
}

/** The progress a run recorded in its memo (workflows/run-progress.ts: recordProgress), if it did. */
export function recordedProgress(described: Pick<WorkflowExecutionDescription, 'memo'>): RunProgress | undefined {
  const progress = described.memo?.[PROGRESS_MEMO];
  return typeof progress === 'object' && progress !== null ? (progress as RunProgress) : undefined;
}

/**
 * A run's status from what Temporal keeps with the execution, for when no worker can answer its
 * query: the progress from its memo, the stage from its ReinStage search attribute.
 */
const CLOSED_STATES: Partial<Record<string, ClosedRunState>> = {
  CANCELLED: 'cancelled',
  FAILED: 'failed',
  TERMINATED: 'terminated',
  TIMED_OUT: 'timed_out',
};

export function recordedStatus(runId: string, described: WorkflowExecutionDescription): RunStatus | undefined {
  const progress = recordedProgress(described);
  if (!progress) return undefined;
  // The attribute's `iteration-2` is the query's `iteration 2`.
  const stage = (stageAttribute(described) ?? 'starting').replace(/^iteration-(\d+)$/, 'iteration $1');
  return {
    runId,
    // A closed execution's memo still says what it was doing when it ended: its state is how it ended.
    state:
      CLOSED_STATES[described.status.name] ??
      (stage === 'paused' ? 'paused' : stage === 'stopped' ? 'stopped' : 'running'),
    stage,
    ...progress,
  };
}

/** A workflow's ReinStage search attribute. */
export function stageAttribute(described: Pick<WorkflowExecutionDescription, 'searchAttributes'>): string | undefined {
  return (described.searchAttributes.ReinStage as string[] | undefined)?.[0];
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
  const pendingActivities = raw.pendingActivities ?? [];
  const pending = pendingActivities.find((a) => a.lastFailure) ?? pendingActivities[0];
  if (!pending) {
    // The stage's work may be in a child (an iteration's release): follow it down.
    const child = raw.pendingChildren?.[0]?.workflowId;
    return child ? describeStage(client, child) : undefined;
  }
  const beat = heartbeatOf(pending);
  const progress = setProgress(described.memo, pendingActivities) ?? beat;
  return {
    workflowId,
    stage: stageAttribute(described),
    type: pending.activityType?.name ?? 'activity',
    attempt: pending.attempt ?? 1,
    done: progress?.done,
    total: progress?.total,
    lastFailure: pending.lastFailure?.message ?? undefined,
    waiting: pendingActivities.map((a) => heartbeatOf(a)?.waiting).find((w) => w !== undefined),
  };
}

type PendingActivity = NonNullable<WorkflowExecutionDescription['raw']['pendingActivities']>[number];

/** What a pending activity last heartbeated: a rollout set's or shard's progress, a stage's. */
function heartbeatOf(pending: PendingActivity): { done?: number; total?: number; waiting?: string } | undefined {
  const payload = pending.heartbeatDetails?.payloads?.[0];
  return payload
    ? (defaultPayloadConverter.fromPayload(payload) as { done?: number; total?: number; waiting?: string } | undefined)
    : undefined;
}

/**
 * A rollout set run in shards (workflows/rollout-shards.ts), over the whole set: the rollouts of
 * its finished shards (the workflow's memo) plus those its running shards heartbeated. Undefined
 * for anything else (one activity, another stage).
 */
function setProgress(
  memo: Record<string, unknown> | undefined,
  pending: readonly PendingActivity[],
): { done: number; total: number } | undefined {
  const set = memo?.[SHARDS_MEMO] as ShardedProgress | undefined;
  const shards = pending.filter((a) => a.activityType?.name === 'runRollouts');
  if (!set || set.shards === 0 || shards.length === 0) return undefined;
  const running = shards.reduce((n, a) => n + (heartbeatOf(a)?.done ?? 0), 0);
  return { done: set.doneInFinishedShards + running, total: set.total };
}

/** Temporal's status of a run's latest execution (RUNNING, COMPLETED, FAILED, TERMINATED, ...). */
export async function runExecutionStatus(client: Client, runId: string): Promise<string> {
  try {
    return (await client.workflow.getHandle(runId).describe()).status.name;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new RunNotFoundError(`no run named ${runId}; \`rein runs\` lists the runs`);
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
