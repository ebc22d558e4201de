import { CancellationScope, executeChild, log } from '@temporalio/workflow';
import { iterationBatchId } from '../src/rollouts/rollout-id.js';
import { rootMessage } from './failures.js';
import { rolloutSet, trainingSet } from './rollout-set.js';
import { iterationTaskIds, type TrainingRunInput } from './run-input.js';
import type { SampledRollouts } from './sampled-rollouts.js';

/** The next iteration's rollouts while this iteration updates and replays (the asynchronous schedule). */
export interface RolloutsAhead {
  iteration: number;
  policyVersion: string;
  workflowId: string;
  /** Stops the set (the run stops): its rollouts end cancelled and nothing trains on them. */
  cancel(): void;
  /** Its rollouts, or null when the set failed or was cancelled: the iteration then runs its own. */
  settled: Promise<SampledRollouts | null>;
}

/** The workflow id of an iteration's training rollout set, when it runs as its own workflow. */
export const rolloutSetWorkflowId = (runId: string, iteration: number) => `${runId}-it${iteration}-rollouts`;

/**
 * An iteration's training rollouts as a child workflow (a sharded set), pinned to `policyVersion`,
 * into the batch the iteration builds from: the same rollout ids whichever schedule ran them.
 */
export async function trainRollouts(
  input: TrainingRunInput,
  runId: string,
  iteration: number,
  policyVersion: string,
): Promise<SampledRollouts> {
  const taskIds = iterationTaskIds(input, iteration);
  const { samplesPerTask } = input.train;
  const rollouts = await executeChild(rolloutSet, {
    workflowId: rolloutSetWorkflowId(runId, iteration),
    staticSummary: `it${iteration}: train rollouts, ${taskIds.length} tasks x ${samplesPerTask} on ${policyVersion}`,
    args: [
      {
        ...trainingSet(
          iterationBatchId(runId, iteration),
          input.configHash,
          { ...input.train, taskIds },
          policyVersion,
        ),
        rescore: true,
        ...(input.shards && { shards: input.shards }),
        ...(input.heartbeatTimeoutSeconds && { heartbeatTimeoutSeconds: input.heartbeatTimeoutSeconds }),
      },
    ],
  });
  return { iteration, policyVersion, rollouts };
}

/**
 * Starts `iteration`'s rollouts now, from `policyVersion` (the newest version the run has trained
 * and serves: never the candidate in training), in a scope the run can cancel.
 */
export function startRolloutsAhead(
  input: TrainingRunInput,
  runId: string,
  iteration: number,
  policyVersion: string,
): RolloutsAhead {
  const scope = new CancellationScope();
  const settled = scope
    .run(() => trainRollouts(input, runId, iteration, policyVersion))
    .catch((err: unknown) => {
      // The iteration runs its own set then, into the same batch: finished rollouts are read back.
      log.warn('rollouts ahead did not finish', { iteration, error: rootMessage(err) });
      return null;
    });
  return {
    iteration,
    policyVersion,
    workflowId: rolloutSetWorkflowId(runId, iteration),
    cancel: () => scope.cancel(),
    settled,
  };
}
