import { WorkflowNotFoundError, type Client, type WorkflowExecutionDescription } from '@temporalio/client';
import { STAGES_MEMO, type IterationStage, type TrainingIterationResult } from '../../workflows/index.js';

/** One iteration's workflow as Temporal keeps it: where it is, how it ended, and how long each stage took. */
export interface IterationWorkflow {
  iteration: number;
  workflowId: string;
  /** Temporal's id of the execution (for links into the Web UI). */
  executionRunId: string;
  execution: string;
  /** The iteration's result once it completed. */
  result: TrainingIterationResult | undefined;
  /**
   * Seconds each stage took (rollouts, batch, update, heldout, ledger), from when the workflow recorded each began;
   * a running stage counts up to now.
   */
  stageSeconds: Record<string, number>;
  /** The release child workflow (held-out replays and the gate), when the iteration started one. */
  release: { workflowId: string; executionRunId: string } | undefined;
}

/** Completed iterations remembered by a caller's cache before it starts afresh (a few KiB each). */
const COMPLETED_KEPT = 10_000;

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
    const stages = recordedStages(described);
    const stageSeconds = stageSecondsOf(stages, described.closeTime?.getTime() ?? now);
    const release = await releaseOf(client, runId, iteration, stages);
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

/** The iteration's stages memo (workflows/training-iteration.ts: STAGES_MEMO): when each stage began. */
function recordedStages(
  described: Pick<WorkflowExecutionDescription, 'memo'>,
): Partial<Record<IterationStage, number>> {
  const stages = described.memo?.[STAGES_MEMO];
  return typeof stages === 'object' && stages !== null ? (stages as Partial<Record<IterationStage, number>>) : {};
}

/**
 * Seconds each stage took, from when each began: a stage ends where the next one begins, the last
 * at `end` (now while the iteration runs, so the chart grows while the stage goes on; its close
 * time once it closed). `done` only marks the end.
 */
export function stageSecondsOf(stages: Partial<Record<IterationStage, number>>, end: number): Record<string, number> {
  const begun = (Object.entries(stages) as Array<[IterationStage, number]>).sort(([, a], [, b]) => a - b);
  const seconds: Record<string, number> = {};
  begun.forEach(([stage, at], i) => {
    if (stage === 'done') return;
    seconds[stage] = Math.max(0, (begun[i + 1]?.[1] ?? end) - at) / 1000;
  });
  return seconds;
}

/** The iteration's release child (held-out replays and the gate), once its heldout stage began and Temporal has it. */
async function releaseOf(
  client: Client,
  runId: string,
  iteration: number,
  stages: Partial<Record<IterationStage, number>>,
): Promise<IterationWorkflow['release']> {
  if (stages.heldout === undefined) return undefined;
  const workflowId = `${runId}-it${iteration}-release`;
  try {
    return { workflowId, executionRunId: (await client.workflow.getHandle(workflowId).describe()).runId };
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}
