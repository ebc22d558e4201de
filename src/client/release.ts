import type { Client } from '@temporalio/client';
import type { ReinConfig } from '../config/schema.js';
import { ConfigError } from '../config/load.js';
import type { releaseCandidate, ReleaseCandidateInput, ReleaseCandidateResult } from '../../workflows/index.js';
import { configHash } from '../config/config-hash.js';
import { harnessVersionOf, storeConfigOfStart } from './run-config.js';
import { heldoutSelection } from './runs.js';

/**
 * The releaseCandidate input for a version named by hand (`rein gate`): the config's held-out
 * set, its gate settings, and a replay batch named after the version and the config, so asking
 * again reuses the replays already done.
 */
export function releaseInput(
  config: ReinConfig,
  candidate: string,
  options: { promote: boolean; heldoutLimit?: number | undefined; actor: string },
  source = 'config',
): ReleaseCandidateInput {
  const { run } = config;
  const heldout = heldoutSelection(run, options.heldoutLimit ?? run.heldoutLimit);
  if (!heldout) {
    throw new ConfigError(source, [
      'run.heldoutTasks: not set; the gate replays a held-out task set with the candidate and production (see examples/calculator-agent/rein.yaml)',
    ]);
  }
  return {
    candidate,
    base: { version: run.base.version, checkpointUri: run.base.checkpoint as string },
    heldout,
    samplesPerTask: config.gate.samplesPerTask,
    configHash: configHash(config),
    ...harnessVersionOf(config),
    promote: options.promote,
    actor: options.actor,
    heartbeatTimeoutSeconds: run.heartbeatTimeoutSeconds,
  };
}

/**
 * Starts a release and returns its workflow id (the decision lands in the registry when it is
 * done); the config the input was built from is stored first, for the workers to load by its hash.
 */
export async function startRelease(
  client: Client,
  taskQueue: string,
  input: ReleaseCandidateInput,
  config: ReinConfig,
): Promise<string> {
  await storeConfigOfStart(config, input.configHash);
  const handle = await client.workflow.start<typeof releaseCandidate>(
    'releaseCandidate',
    releaseOptions(taskQueue, input),
  );
  return handle.workflowId;
}

/** Runs a release to its end (replays, gate, promotion when asked) and returns what it decided. */
export async function runRelease(
  client: Client,
  taskQueue: string,
  input: ReleaseCandidateInput,
  config: ReinConfig,
): Promise<ReleaseCandidateResult> {
  await storeConfigOfStart(config, input.configHash);
  return client.workflow.execute<typeof releaseCandidate>('releaseCandidate', releaseOptions(taskQueue, input));
}

function releaseOptions(taskQueue: string, input: ReleaseCandidateInput) {
  return {
    taskQueue,
    workflowId: `release-${input.candidate}-${Date.now().toString(36)}`,
    args: [input] as [ReleaseCandidateInput],
    staticSummary: `Rein release: ${input.candidate} against production on ${input.heldout.taskIds.length} held-out tasks`,
  };
}
