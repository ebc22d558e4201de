import { executeChild, isCancellation } from '@temporalio/workflow';
import { rootMessage } from './failures.js';
import type { SampledRollouts } from './sampled-rollouts.js';
import { iterationTaskIds, type TrainingRunInput } from './run-input.js';
import { trainingIteration, type TrainingIterationResult } from './training-iteration.js';

/**
 * One iteration as a child workflow, tried again as `<run>-it<n>-try<k>` with onFailedIteration
 * `retry`; its result, or the root cause of its last failure. A cancelled run is not a failed
 * iteration: the cancellation goes on up (and is not tried again). With `sampled`, the iteration
 * trains on rollouts already run (the asynchronous schedule) instead of running its own; a retry
 * trains on the same ones.
 */
export async function runIteration(
  input: TrainingRunInput,
  runId: string,
  iteration: number,
  policyVersion: string,
  setCurrentWorkflow: (workflowId: string) => void,
  sampled?: SampledRollouts,
): Promise<{ result: TrainingIterationResult } | { failure: string; tries: number }> {
  const taskIds = iterationTaskIds(input, iteration);
  const replayHeldout =
    input.heldout && (iteration % (input.heldoutEvery ?? 1) === 0 || iteration === input.iterations);
  const tries = input.onFailedIteration === 'retry' ? (input.maxIterationTries ?? 3) : 1;
  const samples = sampled ? ` (sampled from ${sampled.policyVersion})` : '';
  let failure = 'failed';
  for (let attempt = 1; attempt <= tries; attempt++) {
    const workflowId = `${runId}-it${iteration}${attempt > 1 ? `-try${attempt}` : ''}`;
    setCurrentWorkflow(workflowId);
    try {
      const result = await executeChild(trainingIteration, {
        workflowId,
        staticSummary: `it${iteration}: train ${policyVersion} on ${taskIds.length} tasks x ${input.train.samplesPerTask}${samples}${replayHeldout ? ', then the held-out gate' : ''}`,
        args: [
          {
            runId,
            iteration,
            policyVersion,
            configHash: input.configHash,
            ...(input.harnessVersion && { harnessVersion: input.harnessVersion }),
            train: { taskSet: input.train.taskSet, taskIds, samplesPerTask: input.train.samplesPerTask },
            ...(sampled && { sampled: { policyVersion: sampled.policyVersion, rollouts: sampled.rollouts } }),
            ...(replayHeldout && {
              heldout: input.heldout,
              release: {
                samplesPerTask: input.release?.samplesPerTask ?? 1,
                promote: input.release?.promote ?? false,
                base: input.base,
              },
            }),
            ...(input.heartbeatTimeoutSeconds && { heartbeatTimeoutSeconds: input.heartbeatTimeoutSeconds }),
            ...(input.shards && { shards: input.shards }),
            ...(input.environmentVariants && { environmentVariants: true }),
          },
        ],
      });
      return { result };
    } catch (err) {
      if (isCancellation(err)) throw err;
      failure = rootMessage(err);
    }
  }
  return { failure, tries };
}
