import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { artifactStoreFromConfig } from '../artifacts/from-config.js';
import { storeRunConfig } from '../config/run-config.js';
import type { ReinConfig } from '../config/schema.js';
import { harnessVersion } from '../rollouts/harness-spec.js';
import { RunNotFoundError } from './run-errors.js';

/**
 * Stores the config a run (a release, a shadow run, a schedule's runs) is started from in the
 * artifact store under its hash, before its workflow starts: the workflow carries only the hash,
 * and every worker loads the run's own harness and settings by it. Refuses an input whose hash is
 * another config's, which no worker could load.
 */
export async function storeConfigOfStart(config: ReinConfig, inputConfigHash: string): Promise<void> {
  const stored = await storeRunConfig(artifactStoreFromConfig(config), config);
  if (stored.configHash !== inputConfigHash) {
    throw new Error(
      `the input names config ${inputConfigHash}, but the config it is started with hashes to ${stored.configHash}: build the input from the same config`,
    );
  }
}

/** The harness's version for replay and decision ids; none when the config has no harness. */
export function harnessVersionOf(config: ReinConfig): { harnessVersion?: string } {
  return config.harness ? { harnessVersion: harnessVersion(config.harness) } : {};
}

/** The hash of the config a run was started with (its memo's), or undefined for a run started without one. */
export async function runConfigHash(client: Client, runId: string): Promise<string | undefined> {
  try {
    const { memo } = await client.workflow.getHandle(runId).describe();
    return typeof memo?.configHash === 'string' ? memo.configHash : undefined;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new RunNotFoundError(`no run named ${runId}; \`rein runs\` lists the runs`);
    throw err;
  }
}
