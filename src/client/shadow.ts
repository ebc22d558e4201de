import { WorkflowFailedError, type Client } from '@temporalio/client';
import type { ReinConfig } from '../config/schema.js';
import { ConfigError } from '../config/load.js';
import { PRODUCTION_ALIAS } from '../registry/promotion.js';
import type { shadowRun, ShadowRunInput, ShadowRunResult } from '../../workflows/index.js';
import { configHash } from '../config/config-hash.js';
import { harnessVersionOf, storeConfigOfStart } from './run-config.js';
import { heldoutSelection } from './runs.js';

/**
 * The shadowRun input from the config: its held-out tasks with the harness's eval settings, k
 * samples per task as the gate replays them, and a batch named after the candidate and the
 * config, so asking again reads back the rollouts already run.
 */
export function shadowRunInput(
  config: ReinConfig,
  candidate: string,
  options: { heldoutLimit?: number | undefined; alias?: string | undefined } = {},
  source = 'config',
): ShadowRunInput {
  const { run } = config;
  const heldout = heldoutSelection(run, options.heldoutLimit ?? run.heldoutLimit);
  if (!heldout) {
    throw new ConfigError(source, [
      'run.heldoutTasks: not set; a shadow run runs the held-out task set through the harness (see examples/calculator-agent/rein.yaml)',
    ]);
  }
  const hash = configHash(config);
  const { harnessVersion } = harnessVersionOf(config);
  return {
    candidate,
    alias: options.alias ?? PRODUCTION_ALIAS,
    heldout,
    samplesPerTask: config.gate.samplesPerTask,
    configHash: hash,
    // The harness is in the name too: a shadow run with another harness runs its own rollouts.
    batchId: `shadow.${candidate}.${hash.slice(0, 12)}${harnessVersion ? `.${harnessVersion.slice(0, 10)}` : ''}.${heldout.taskIds.length}`,
    heartbeatTimeoutSeconds: run.heartbeatTimeoutSeconds,
  };
}

/**
 * Runs a shadow run to its end and returns the counts and where the full report is; the config
 * the input was built from is stored first, for the workers to load by its hash.
 */
export async function runShadow(
  client: Client,
  taskQueue: string,
  input: ShadowRunInput,
  config: ReinConfig,
): Promise<ShadowRunResult> {
  await storeConfigOfStart(config, input.configHash);
  const workflowId = `shadow-${input.candidate}-${Date.now().toString(36)}`;
  try {
    return await client.workflow.execute<typeof shadowRun>('shadowRun', {
      taskQueue,
      workflowId,
      args: [input],
      staticSummary: `Rein shadow run: ${input.heldout.taskIds.length} held-out tasks on ${input.alias}, mirrored to ${input.candidate}`,
    });
  } catch (err) {
    // "Workflow execution failed" says nothing; the activity's own failure says what to fix.
    if (err instanceof WorkflowFailedError)
      throw new Error(`shadow run ${workflowId} failed: ${rootCause(err).message}`, { cause: err });
    throw err;
  }
}

function rootCause(err: Error): Error {
  let e = err;
  while (e.cause instanceof Error) e = e.cause;
  return e;
}
