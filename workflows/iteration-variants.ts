import { proxyActivities } from '@temporalio/workflow';
import type { KeptVariant, VariantVerdict } from '../activities/environment.js';
import type { Activities } from '../activities/index.js';
import type { RunRolloutsSummary } from '../activities/run-rollouts.js';
import { ENVIRONMENT_ACTIVITY } from './activity-options.js';
import type { TaskSelection } from './task-selection.js';

const { planVariants, keepVariants } = proxyActivities<Activities>(ENVIRONMENT_ACTIVITY);

/** What an iteration did with the run's environment variants (absent: the run has none). */
export interface IterationVariants {
  /** Verdicts on the variants checked this iteration (each run checks a variant once). */
  verdicts: VariantVerdict[];
  /** Training tasks run in a kept variant instead of the original environment. */
  variantTasks: number;
  /** The variants kept in this run so far (the training tasks mix them in). */
  kept: KeptVariant[];
}

type TrainSelection = TaskSelection & { samplesPerTask: number };

/**
 * The iteration's training tasks with the run's kept variants mixed in (environment.curriculum):
 * variants not judged yet are first checked with fresh rollouts on a few of the iteration's tasks
 * (`runSet`, a batch of their own that nothing trains on) and kept only if some samples solve them
 * and not all. Held-out replay never comes here: it runs the original environment.
 */
export async function withVariants(
  input: { runId: string; configHash: string; iteration: number; train: TrainSelection },
  batchId: string,
  runSet: (batchId: string, selection: TrainSelection) => Promise<RunRolloutsSummary>,
): Promise<{ train: TrainSelection; variants: IterationVariants | null }> {
  const request = {
    runId: input.runId,
    configHash: input.configHash,
    iteration: input.iteration,
    taskIds: input.train.taskIds,
  };
  const plan = await planVariants(request);
  if (!plan) return { train: input.train, variants: null };
  let { trainTaskIds, kept } = plan;
  let verdicts: VariantVerdict[] = [];
  if (plan.validation.length > 0) {
    const validateBatch = `${batchId}-validate`;
    const taskIds = plan.validation.flatMap((v) => v.taskIds);
    await runSet(validateBatch, { taskSet: input.train.taskSet, taskIds, samplesPerTask: plan.samplesPerTask });
    ({ verdicts, trainTaskIds, kept } = await keepVariants({
      ...request,
      batchId: validateBatch,
      samplesPerTask: plan.samplesPerTask,
      validation: plan.validation,
    }));
  }
  const original = new Set(input.train.taskIds);
  return {
    train: { ...input.train, taskIds: trainTaskIds },
    variants: { verdicts, variantTasks: trainTaskIds.filter((id) => !original.has(id)).length, kept },
  };
}
