import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { pauseSignal, resumeSignal, stopSignal } from '../../workflows/index.js';
import { isTemporalUnreachable, RunNotFoundError } from './run-errors.js';
import { workerIsPolling } from './run-status.js';

/** Signals a running run: pause (between iterations), resume, stop (after the current iteration). */
export async function signalRun(client: Client, runId: string, signal: 'pause' | 'resume' | 'stop'): Promise<void> {
  const definition = { pause: pauseSignal, resume: resumeSignal, stop: stopSignal }[signal];
  try {
    await client.workflow.getHandle(runId).signal(definition);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new RunNotFoundError(`no running run named ${runId}; \`rein runs\` lists the runs`);
    throw err;
  }
}

/**
 * Cancels a run: Temporal cancels its current iteration and that iteration's running activity
 * (rollouts, the update), and the run ends CANCELLED. Waits for that when a worker polls the
 * task queue ('cancelled'); otherwise, or with `wait: false`, the request waits for one ('requested').
 */
export async function cancelRun(
  client: Client,
  runId: string,
  taskQueue: string,
  { wait = true }: { wait?: boolean } = {},
): Promise<'cancelled' | 'requested'> {
  const handle = client.workflow.getHandle(runId);
  try {
    const { status } = await handle.describe();
    if (status.name !== 'RUNNING')
      throw new RunNotFoundError(
        `run ${runId} is not running (it ${status.name === 'CANCELLED' ? 'was cancelled' : status.name.toLowerCase().replace('_', ' ')}); \`rein status ${runId}\` shows it`,
      );
    await handle.cancel();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new RunNotFoundError(`no running run named ${runId}; \`rein runs\` lists the runs`);
    throw err;
  }
  if (!wait || !(await workerIsPolling(client, taskQueue))) return 'requested';
  try {
    await handle.result();
  } catch (err) {
    if (isTemporalUnreachable(err)) throw err;
  }
  const { status } = await handle.describe();
  if (status.name !== 'CANCELLED')
    throw new Error(
      `run ${runId} did not end cancelled: it ${status.name.toLowerCase()}; \`rein status ${runId}\` says why`,
    );
  return 'cancelled';
}
