import { variantSummary, type VariantSpec } from './variant-spec.js';

/**
 * The check a variant passes before training uses it: its verifier's verdict must still mean
 * something. Rein runs fresh rollouts of the variant and keeps it only if some sample solves it
 * (a variant no one solves is too hard, or broken so that its verifier cannot tell good from
 * bad) and not every sample does (one everyone solves teaches nothing: all its advantages are 0).
 */

/** One fresh rollout of a variant task: its success, or null when Rein could not score it (Rein's own fault). */
export interface ValidationResult {
  taskId: string;
  sample: number;
  success: number | null;
}

export interface ValidationOptions {
  /** A sample solves the variant when its success is at least this (default 1: full success). */
  successThreshold?: number;
  /** Scored samples needed for a verdict (default: half the samples, at least 2). */
  minScored?: number;
}

export interface VariantValidation {
  kept: boolean;
  /** The verdict in words, for the ledger, the run report and the console. */
  reason: string;
  /** Rollouts run. */
  samples: number;
  /** Of them, scored (unscored ones are Rein's fault, not the variant's: they count neither way). */
  scored: number;
  /** Of the scored, those that solved it. */
  solved: number;
  /** solved / scored, 0 when none was scored. */
  solvedShare: number;
}

/** Judges a variant from its fresh rollouts; bad options are refused with the fix. */
export function validateVariant(
  results: readonly ValidationResult[],
  options: ValidationOptions = {},
): VariantValidation {
  const threshold = options.successThreshold ?? 1;
  if (!Number.isFinite(threshold))
    throw new Error(`successThreshold must be a finite number (default 1), not ${threshold}`);
  const samples = results.length;
  const minScored = options.minScored ?? Math.max(2, Math.ceil(samples / 2));
  if (!Number.isInteger(minScored) || minScored < 1)
    throw new Error(`minScored must be a whole number of at least 1, not ${minScored}`);
  for (const r of results)
    if (r.success !== null && !Number.isFinite(r.success))
      throw new Error(
        `task ${r.taskId} sample ${r.sample}: success must be a number, or null when unscored, not ${r.success}`,
      );
  const scores = results.flatMap((r) => (r.success === null ? [] : [r.success]));
  const scored = scores.length;
  const solved = scores.filter((s) => s >= threshold).length;
  const counts = { samples, scored, solved, solvedShare: scored === 0 ? 0 : solved / scored };
  return { ...counts, ...verdict(counts, minScored) };
}

function verdict(
  { samples, scored, solved }: { samples: number; scored: number; solved: number },
  minScored: number,
): { kept: boolean; reason: string } {
  if (samples === 0) return { kept: false, reason: 'no sample ran: nothing to judge; run it again' };
  if (scored < minScored)
    return {
      kept: false,
      reason: `only ${scored} of ${samples} samples scored: not enough evidence; run it again`,
    };
  const unscored = samples - scored;
  const of = `${scored} samples${unscored > 0 ? ` (${unscored} more unscored)` : ''}`;
  if (solved === 0)
    return {
      kept: false,
      reason: `solved by no sample of ${of}: too hard or broken (its verifier cannot tell good from bad)`,
    };
  if (solved === scored) return { kept: false, reason: `solved by every sample of ${of}: too easy to teach anything` };
  return { kept: true, reason: `solved by ${solved} of ${of}: kept` };
}

/** A variant's check as the environment ledger keeps it: JSON, self-describing. */
export interface ValidationRecord {
  variant: string;
  name: string;
  /** What the variant changes, in words (variantSummary). */
  changes: string;
  environment: string;
  samples: number;
  scored: number;
  solved: number;
  solvedShare: number;
  kept: boolean;
  reason: string;
  /** When the check ended, ISO 8601. */
  at: string;
}

export function validationRecord(
  variant: { id: string; spec: VariantSpec },
  environmentId: string,
  validation: VariantValidation,
  at: Date | string,
): ValidationRecord {
  return {
    variant: variant.id,
    name: variant.spec.name,
    changes: variantSummary(variant.spec),
    environment: environmentId,
    samples: validation.samples,
    scored: validation.scored,
    solved: validation.solved,
    solvedShare: validation.solvedShare,
    kept: validation.kept,
    reason: validation.reason,
    at: typeof at === 'string' ? at : at.toISOString(),
  };
}
