import { proxyActivities } from '@temporalio/workflow';
import type { KeptVariant, RiggerSummary, VariantVerdict } from '../activities/environment.js';
import type { Activities } from '../activities/index.js';
import type { RunRolloutsSummary } from '../activities/run-rollouts.js';
import { ENVIRONMENT_ACTIVITY, REGISTRY_ACTIVITY } from './activity-options.js';
import type { VariantUse } from '../src/environments/run-variants.js';
import type { TrainSelection } from './task-selection.js';

const { planVariants, keepVariants, assessVariants } = proxyActivities<Activities>(ENVIRONMENT_ACTIVITY);
const { recordLedgerEntry } = proxyActivities<Activities>(REGISTRY_ACTIVITY);

/** What an iteration did with the run's environment variants (absent: the run has none). */
export interface IterationVariants {
  /** Verdicts on the variants checked this iteration (each run checks a variant once). */
  verdicts: VariantVerdict[];
  /** Training tasks run in a kept variant instead of the original environment. */
  variantTasks: number;
  /** The variants kept in this run so far (the training tasks mix them in). */
  kept: KeptVariant[];
  /** How the training rollouts did in the original environment and in each variant used. */
  used?: VariantUse[];
  /** What the rigger found after the training rollouts and proposed for the next iterations (absent: it is off). */
  rigger?: RiggerSummary;
}

/**
 * The iteration's training tasks with the run's kept variants mixed in (environment.curriculum):
 * variants not judged yet are first checked with fresh rollouts on a few of the iteration's tasks
 * (`runSet`, a batch of their own that nothing trains on) and kept only if some samples solve them
 * and not all. Held-out replay never comes here: it runs the original environment.
 */
export async function withVariants(
  input: { runId: string; configHash: string; iteration: number; policyVersion: string; train: TrainSelection },
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
    const startedAt = Date.now();
    const taskIds = plan.validation.flatMap((v) => v.taskIds);
    await runSet(validateBatch, {
      taskSet: input.train.taskSet,
      taskIds,
      samplesPerTask: plan.samplesPerTask,
      ...(plan.proposed.length > 0 && { variants: plan.proposed }),
    });
    ({ verdicts, trainTaskIds, kept } = await keepVariants({
      ...request,
      batchId: validateBatch,
      samplesPerTask: plan.samplesPerTask,
      validation: plan.validation,
    }));
    const selection = { batchId: validateBatch, samplesPerTask: plan.samplesPerTask };
    for (const verdict of verdicts) await recordVariantRow(input, selection, verdict, startedAt);
  }
  const original = new Set(input.train.taskIds);
  return {
    train: { ...input.train, taskIds: trainTaskIds, ...(plan.proposed.length > 0 && { variants: plan.proposed }) },
    variants: { verdicts, variantTasks: trainTaskIds.filter((id) => !original.has(id)).length, kept },
  };
}

/**
 * After the training rollouts: how they did in each environment, and the rigger's turn (its
 * proposals are checked by the next iteration, like declared variants).
 */
export async function assessedVariants(
  input: { runId: string; configHash: string; iteration: number },
  batchId: string,
  train: TrainSelection,
  variants: IterationVariants,
): Promise<IterationVariants> {
  const { used, rigger } = await assessVariants({
    runId: input.runId,
    configHash: input.configHash,
    iteration: input.iteration,
    taskIds: train.taskIds,
    batchId,
    samplesPerTask: train.samplesPerTask,
  });
  return { ...variants, used, ...(rigger && { rigger }) };
}

/**
 * A variant's check as a row of the environment ledger (`<run>.variant.<id>`): keyed by the
 * environment and the variant, its metrics from the variant's validation rollouts, its verdict
 * beside them. The run's gate decisions link these rows (DecisionEnvironment).
 */
function recordVariantRow(
  input: { runId: string; configHash: string; iteration: number; policyVersion: string; train: TrainSelection },
  selection: { batchId: string; samplesPerTask: number },
  verdict: VariantVerdict,
  startedAt: number,
): Promise<void> {
  const { name, id, origin, changes, why, kept, reason, samples, scored, solved, uri } = verdict;
  return recordLedgerEntry({
    id: `${input.runId}.variant.${id}`,
    kind: 'variant',
    runId: input.runId,
    iteration: input.iteration,
    policyVersion: input.policyVersion,
    parent: null,
    taskSet: { sha256: input.train.taskSet.sha256 },
    environmentVariants: [id],
    sets: [{ ...selection, taskIds: verdict.taskIds }],
    elapsedSeconds: (Date.now() - startedAt) / 1000,
    decisionId: null,
    configHash: input.configHash,
    variant: { name, id, origin, changes, why, kept, reason, samples, scored, solved, record: uri },
  });
}
