/**
 * When each stage of a training run was busy, from the workflows' own histories: every activity's
 * started → closed interval in the run and all its child workflows (iterations, rollout sets,
 * releases), by stage. A stage's busy time is the union of its intervals (shards and overlapping
 * iterations count once); its idle time is the rest of the run's wall time.
 */
import type { Client } from '@temporalio/client';

export type Stage = 'rollouts' | 'heldout' | 'batch' | 'update' | 'other';
const seconds = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
  Number(t?.seconds ?? 0) + (t?.nanos ?? 0) / 1e9;

/** A held-out replay runs in a release or in the run itself (the base's); training rollouts anywhere else. */
function stageOf(activity: string, workflowId: string, runId: string): Stage {
  if (activity === 'runRollouts')
    return workflowId === runId || workflowId.endsWith('-release') ? 'heldout' : 'rollouts';
  if (activity === 'buildBatch') return 'batch';
  if (activity === 'updatePolicy') return 'update';
  return 'other';
}

/** One activity's execution: started → closed (completed, failed or timed out), in seconds. */
export interface ActivityInterval {
  activity: string;
  workflowId: string;
  start: number;
  end: number;
}

/** A workflow's wall time: its first event to its last. */
export async function workflowWallSeconds(client: Client, workflowId: string): Promise<number> {
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  return seconds(events.at(-1)?.eventTime) - seconds(events[0]?.eventTime);
}

/** The activity executions of a workflow and, with `children`, recursively of its child workflows. */
export async function activityIntervals(
  client: Client,
  workflowId: string,
  options: { execution?: string; children?: boolean } = {},
): Promise<ActivityInterval[]> {
  const events = (await client.workflow.getHandle(workflowId, options.execution).fetchHistory()).events ?? [];
  const type = new Map<number, string>();
  const started = new Map<number, number>();
  const intervals: ActivityInterval[] = [];
  const children: Array<Promise<ActivityInterval[]>> = [];
  for (const e of events) {
    const id = Number(e.eventId);
    if (e.activityTaskScheduledEventAttributes)
      type.set(id, e.activityTaskScheduledEventAttributes.activityType?.name ?? '?');
    if (e.activityTaskStartedEventAttributes)
      started.set(Number(e.activityTaskStartedEventAttributes.scheduledEventId), seconds(e.eventTime));
    const closed =
      e.activityTaskCompletedEventAttributes ??
      e.activityTaskFailedEventAttributes ??
      e.activityTaskTimedOutEventAttributes;
    if (closed) {
      const scheduled = Number(closed.scheduledEventId);
      const end = seconds(e.eventTime);
      intervals.push({ activity: type.get(scheduled) ?? '?', workflowId, start: started.get(scheduled) ?? end, end });
    }
    const child = e.childWorkflowExecutionStartedEventAttributes?.workflowExecution;
    if (options.children && child?.workflowId)
      children.push(
        activityIntervals(client, child.workflowId, { execution: child.runId ?? undefined, children: true }),
      );
  }
  return [...intervals, ...(await Promise.all(children)).flat()];
}

/** Total length of a union of intervals. */
function unionLength(intervals: Array<{ start: number; end: number }>): number {
  const sorted = [...intervals].sort((a, b) => a.start - b.start);
  let total = 0;
  let [from, to] = [Number.NEGATIVE_INFINITY, Number.NEGATIVE_INFINITY];
  for (const { start, end } of sorted) {
    if (start > to) {
      if (to > from) total += to - from;
      [from, to] = [start, end];
    } else to = Math.max(to, end);
  }
  return to > from ? total + to - from : total;
}

export interface StageTimes {
  wallSeconds: number;
  /** Per stage: seconds with at least one of its activities running, and the rest of the wall time. */
  stages: Record<Stage, { busySeconds: number; idleSeconds: number }>;
  /** Seconds with two or more stages busy at once (what an asynchronous schedule buys). */
  overlapSeconds: number;
}

export async function stageTimes(client: Client, runId: string): Promise<StageTimes> {
  const wall = await workflowWallSeconds(client, runId);
  const intervals = (await activityIntervals(client, runId, { children: true })).map((i) => ({
    ...i,
    stage: stageOf(i.activity, i.workflowId, runId),
  }));
  const names: Stage[] = ['rollouts', 'heldout', 'batch', 'update', 'other'];
  const stages = Object.fromEntries(
    names.map((stage) => {
      const busy = unionLength(intervals.filter((i) => i.stage === stage));
      return [stage, { busySeconds: round(busy), idleSeconds: round(wall - busy) }];
    }),
  ) as StageTimes['stages'];
  const busySum = names.reduce((sum, stage) => sum + unionLength(intervals.filter((i) => i.stage === stage)), 0);
  return { wallSeconds: round(wall), stages, overlapSeconds: round(busySum - unionLength(intervals)) };
}

const round = (s: number) => Math.round(s * 10) / 10;
