import type { IterationVariants } from '../../workflows/iteration-variants.js';
import type { RiggerLlmSummary, VariantOrigin, VariantUse } from './run-variants.js';

/** An iteration's variants as a report shows them (the API's `iterationVariants` schema describes it). */
export interface IterationVariantsView {
  variantTasks?: number;
  used?: VariantUse[];
  verdicts: Array<{ name: string; origin: VariantOrigin; kept: boolean; reason: string; why: string; changes: string }>;
  rigger?: {
    weaknesses: Array<{ kind: string; subject: string; detail: string; share: number }>;
    proposals: Array<{ name: string; why: string; aimedAt: { kind: string; subject: string } }>;
    llm?: RiggerLlmSummary;
  };
}

/**
 * What a run's report and its console page show of an iteration's variants: the iteration's
 * result less its records' addresses and task ids (the run's progress memo keeps this).
 */
export function variantsView(variants: IterationVariants): IterationVariantsView {
  const { variantTasks, used, verdicts, rigger } = variants;
  return {
    variantTasks,
    ...(used && {
      used: used.map(({ name, id, origin, why, rollouts, scored, solved, meanReward }) => ({
        name,
        id,
        origin,
        why,
        rollouts,
        scored,
        solved,
        meanReward,
      })),
    }),
    verdicts: verdicts.map(({ name, origin, kept, reason, why, changes }) => ({
      name,
      origin,
      kept,
      reason,
      why,
      changes,
    })),
    ...(rigger && {
      rigger: {
        weaknesses: rigger.weaknesses.map(({ kind, subject, detail, share }) => ({ kind, subject, detail, share })),
        proposals: rigger.proposals.map(({ name, why, aimedAt }) => ({ name, why, aimedAt })),
        ...(rigger.llm && { llm: rigger.llm }),
      },
    }),
  };
}
