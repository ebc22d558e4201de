import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { tsToMs } from '@temporalio/common';
import proto from '@temporalio/proto';
import type { TrainingIterationResult } from '../../workflows/index.js';

const EventType = proto.temporal.api.enums.v1.EventType;

/** One iteration's workflow as Temporal keeps it: where it is, how it ended, and how long each stage took. */
export interface IterationWorkflow {
  iteration: number;
  workflowId: string;
  /** Temporal's id of the execution (for links into the Web UI). */
  executionRunId: string;
  execution: string;
  /** The iteration's result once it completed. */
  result: TrainingIterationResult | undefined;
  /** Seconds each stage took (rollouts, batch, update, heldout, ledger), from the workflow's history; a running stage counts up to now. */
  stageSeconds: Record<string, number>;
  /** The release child workflow (held-out replays and the gate), when the iteration started one. */
  release: { workflowId: string; executionRunId: string } | undefined;
}

/** Completed iterations remembered by a caller's cache before it starts afresh (a few KiB each). */
const COMPLETED_KEPT = 10_000;

/** Which stage each of the iteration's activities and children is. */
const STAGE_OF: Record<string, string> = {
  runRollouts: 'rollouts',
  buildBatch: 'batch',
  updatePolicy: 'update',
  releaseCandidate: 'heldout',
  recordLedgerEntry: 'ledger',
};

/**
 * The workflows of a run's iterations 1..`through` (the run's `<runId>-it<n>` children; a retried
 * iteration's last try). Iterations never started are left out.
 */
export async function iterationWorkflows(
  client: Client,
  runId: string,
  through: number,
  options: { completed?: Map<string, IterationWorkflow>; now?: number } = {},
): Promise<IterationWorkflow[]> {
  const { completed, now = Date.now() } = options;
  const found: IterationWorkflow[] = [];
  for (let iteration = 1; iteration <= through; iteration++) {
    // A completed iteration never changes: a page polling a long run asks Temporal only about the rest.
    const known = completed?.get(`${runId}-it${iteration}`);
    if (known) {
      found.push(known);
      continue;
    }
    const workflow = (await lastTry(client, `${runId}-it${iteration}`)) ?? undefined;
    if (!workflow) continue;
    const { workflowId, described } = workflow;
    const handle = client.workflow.getHandle(workflowId, described.runId);
    const result = described.status.name === 'COMPLETED' ? await handle.result().catch(() => undefined) : undefined;
    const history = await handle.fetchHistory();
    const { stageSeconds, release } = stagesOf(history.events ?? [], now);
    const view: IterationWorkflow = {
      iteration,
      workflowId,
      executionRunId: described.runId,
      execution: described.status.name,
      result: result as TrainingIterationResult | undefined,
      stageSeconds,
      release,
    };
    if (completed && view.execution === 'COMPLETED' && view.result) {
      if (completed.size >= COMPLETED_KEPT) completed.clear();
      completed.set(`${runId}-it${iteration}`, view);
    }
    found.push(view);
  }
  return found;
}

/** The iteration's workflow, or its last retry (`-try2`, `-try3`, ...). */
async function lastTry(client: Client, workflowId: string) {
  let last:
    | { workflowId: string; described: Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['describe']>> }
    | undefined;
  for (let attempt = 1; ; attempt++) {
    const id = attempt === 1 ? workflowId : `${workflowId}-try${attempt}`;
    try {
      last = { workflowId: id, described: await client.workflow.getHandle(id).describe() };
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return last;
      throw err;
    }
  }
}

type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

/** Stage durations from scheduled/started to closed events; retries of one activity add up in one span. */
export function stagesOf(
  events: readonly HistoryEvent[],
  now: number,
): Pick<IterationWorkflow, 'stageSeconds' | 'release'> {
  const opened = new Map<number, { stage: string; at: number }>();
  const seconds: Record<string, number> = {};
  let release: IterationWorkflow['release'];
  const close = (openedId: unknown, at: number) => {
    const start = opened.get(Number(openedId));
    if (!start) return;
    opened.delete(Number(openedId));
    seconds[start.stage] = (seconds[start.stage] ?? 0) + (at - start.at) / 1000;
  };
  for (const event of events) {
    const at = tsToMs(event.eventTime);
    const id = Number(event.eventId);
    switch (event.eventType) {
      case EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: {
        const stage = STAGE_OF[event.activityTaskScheduledEventAttributes?.activityType?.name ?? ''];
        if (stage) opened.set(id, { stage, at });
        break;
      }
      case EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        close(event.activityTaskCompletedEventAttributes?.scheduledEventId, at);
        break;
      case EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
        close(event.activityTaskFailedEventAttributes?.scheduledEventId, at);
        break;
      case EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
        close(event.activityTaskTimedOutEventAttributes?.scheduledEventId, at);
        break;
      case EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED: {
        const stage = STAGE_OF[event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowType?.name ?? ''];
        if (stage) opened.set(id, { stage, at });
        break;
      }
      case EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED: {
        const a = event.childWorkflowExecutionStartedEventAttributes;
        if (a?.workflowType?.name === 'releaseCandidate' && a.workflowExecution?.workflowId)
          release = { workflowId: a.workflowExecution.workflowId, executionRunId: a.workflowExecution.runId ?? '' };
        break;
      }
      case EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
        close(event.childWorkflowExecutionCompletedEventAttributes?.initiatedEventId, at);
        break;
      case EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED:
        close(event.childWorkflowExecutionFailedEventAttributes?.initiatedEventId, at);
        break;
      default:
        break;
    }
  }
  // Still running: counted up to now, so the chart grows while the stage goes on.
  for (const { stage, at } of opened.values()) seconds[stage] = (seconds[stage] ?? 0) + Math.max(0, now - at) / 1000;
  return { stageSeconds: seconds, release };
}
