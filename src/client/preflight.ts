import type { Client } from '@temporalio/client';
import type { PreflightResult } from '../../workflows/index.js';

export interface PreflightRun {
  workflowId: string;
  runId: string;
  result: PreflightResult;
}

/** Runs the preflight workflow on the task queue and waits for its result. */
export async function runPreflight(client: Client, taskQueue: string, timeoutMs = 120_000): Promise<PreflightRun> {
  const workflowId = `rein-preflight-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  const handle = await client.workflow.start('preflight', {
    taskQueue,
    workflowId,
    args: [],
    workflowExecutionTimeout: timeoutMs,
    staticSummary: 'Rein preflight: is a worker polling, and can its host do the work?',
  });
  const result = (await handle.result()) as PreflightResult;
  return { workflowId, runId: handle.firstExecutionRunId, result };
}
