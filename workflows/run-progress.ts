import { setCurrentDetails, upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import type { GateSummary } from '../activities/release.js';
import type { RunRolloutsSummary } from '../activities/run-rollouts.js';
import type { SampledRollouts } from './sampled-rollouts.js';
import { ReinHeldoutSuccess, ReinPolicyVersion } from './search-attributes.js';
import { failureReasonsByStage, failuresByStage, iterationSummary } from './summaries.js';
import type { TrainingIterationResult } from './training-iteration.js';
import { variantsView, type IterationVariantsView } from '../src/environments/variants-view.js';

/** A held-out replay's result, paired by task. */
export interface HeldoutResult {
  policyVersion: string;
  meanReward: number | null;
  meanRewardByTask: Record<string, number>;
  /** Failed rollouts of the replay by failure class; absent when none failed. */
  byFailureClass?: Record<string, number>;
}

/** What a run has done so far: small, since it travels through continue-as-new. */
export interface RunProgress {
  nextIteration: number;
  policyVersion: string;
  iterations: Array<{
    iteration: number;
    candidate: string | null;
    meanReward: number | null;
    heldoutMeanReward: number | null;
    /** The gate's verdict on the candidate against production, and whether production moved to it. */
    gate?: {
      verdict: GateSummary['verdict'];
      decisionId: string;
      incumbent: string;
      promoted: boolean;
      reasons: string[];
      acceptedRate?: GateSummary['acceptedRate'];
    };
    /** Failed rollouts by failure class per stage (rollouts, heldout, heldout-production); absent when none failed. */
    failures?: Record<string, Record<string, number>>;
    /** Per stage of failures, one failed rollout's reason for each failure class (cut short). */
    failureReasons?: Record<string, Record<string, string>>;
    failed?: string;
    /**
     * Where the trained samples came from: the version the rollouts sampled, the rollouts kept by
     * how many versions behind the trained policy they were, and the trainer's importance
     * correction (absent without one).
     */
    samples?: {
      sampledFrom: string;
      keptByVersionsBehind?: Record<string, number>;
      importance?: { maskedFraction: number; cappedFraction: number; ratioMean: number; ratioMax: number };
    };
    /** What the iteration did with the run's environment variants (variantsView); absent without them. */
    variants?: IterationVariantsView;
  }>;
  /**
   * With held-out tasks: the starting policy's replay, the latest candidate's, and the replay of
   * what production serves after the latest gate (the candidate when it was promoted, else the
   * incumbent it was compared with); `production` is absent until a gate ran.
   */
  heldout?: { base: HeldoutResult; latest: HeldoutResult | null; production?: HeldoutResult };
  /**
   * The asynchronous schedule: the next iteration's rollouts, run while the last one updated (so
   * they cross a continue-as-new); its iteration trains on them.
   */
  sampled?: SampledRollouts;
}

/** Iterations kept in the status (the whole history is in the child workflows and the registry). */
const KEPT_ITERATIONS = 50;

/** The memo key under which a run keeps its progress (see recordProgress). */
export const PROGRESS_MEMO = 'progress';

/**
 * Keeps the run's progress in its memo, which Temporal stores with the execution and returns from
 * describe() with no worker running: `rein status` shows it and `rein resume` continues from it
 * when no worker can answer the status query (the run closed, or its worker is gone). Written once
 * the run reaches its iterations and after each one; a run without it never got that far.
 */
export function recordProgress(progress: RunProgress): void {
  upsertMemo({ [PROGRESS_MEMO]: progress });
}

/** A finished iteration into the progress: its entry, the policy the next one trains from, the held-out results. */
export function recordIteration(progress: RunProgress, result: TrainingIterationResult): void {
  const { release } = result;
  progress.policyVersion = result.candidate;
  progress.iterations.push(iterationEntry(result));
  upsertSearchAttributes([{ key: ReinPolicyVersion, value: result.candidate }]);
  if (progress.heldout && result.heldout) progress.heldout.latest = heldoutResult(result.candidate, result.heldout);
  if (progress.heldout) progress.heldout.production = productionHeldout(result) ?? progress.heldout.production;
  const success =
    release && (release.promoted ? release.gate.acceptedRate?.candidate : release.gate.acceptedRate?.incumbent);
  if (success !== undefined && success !== null) upsertSearchAttributes([{ key: ReinHeldoutSuccess, value: success }]);
}

/** A failed iteration into the progress: its entry, with why it failed and nothing trained. */
export function recordFailedIteration(progress: RunProgress, iteration: number, failure: string): void {
  progress.iterations.push({
    iteration,
    candidate: null,
    meanReward: null,
    heldoutMeanReward: null,
    failed: failure,
  });
}

/**
 * After an iteration, finished or skipped: the entries kept, the next iteration's number, the memo,
 * and the lines the Web UI shows at a glance, oldest first (the last ten).
 */
export function advanceProgress(progress: RunProgress, iteration: number): void {
  progress.iterations = progress.iterations.slice(-KEPT_ITERATIONS);
  progress.nextIteration = iteration + 1;
  recordProgress(progress);
  setCurrentDetails(progress.iterations.slice(-10).map(iterationSummary).join('\n'));
}

export function heldoutResult(policyVersion: string, summary: RunRolloutsSummary): HeldoutResult {
  const failed = Object.keys(summary.byFailureClass ?? {}).length > 0;
  return {
    policyVersion,
    meanReward: summary.meanReward,
    meanRewardByTask: summary.meanRewardByTask,
    ...(failed && { byFailureClass: summary.byFailureClass }),
  };
}

/** A finished iteration as the run's progress keeps it. */
function iterationEntry(result: TrainingIterationResult): RunProgress['iterations'][number] {
  const { release } = result;
  const failures = failuresByStage(result);
  const failureReasons = failureReasonsByStage(result);
  return {
    iteration: result.iteration,
    candidate: result.candidate,
    meanReward: result.rollouts.meanReward,
    heldoutMeanReward: result.heldout?.meanReward ?? null,
    ...(release && {
      gate: {
        verdict: release.gate.verdict,
        decisionId: release.gate.decisionId,
        incumbent: release.incumbent,
        promoted: release.promoted,
        reasons: release.gate.reasons,
        ...(release.gate.acceptedRate && { acceptedRate: release.gate.acceptedRate }),
      },
    }),
    ...(Object.keys(failures).length > 0 && { failures }),
    ...(Object.keys(failureReasons).length > 0 && { failureReasons }),
    samples: samplesEntry(result),
    ...(result.variants && { variants: variantsView(result.variants) }),
  };
}

/** The iteration's samples at a glance (see RunProgress): a few numbers, not the reports. */
function samplesEntry(result: TrainingIterationResult): NonNullable<RunProgress['iterations'][number]['samples']> {
  const importance = result.update.importanceWeights;
  const { keptByVersionsBehind } = result.batch;
  return {
    sampledFrom: result.sampledFrom ?? result.parent,
    ...(keptByVersionsBehind && { keptByVersionsBehind }),
    ...(importance && {
      importance: {
        maskedFraction: importance.maskedFraction,
        cappedFraction: importance.cappedFraction,
        ratioMean: importance.ratio.mean,
        ratioMax: importance.ratio.max,
      },
    }),
  };
}

/**
 * What production serves after the iteration's gate, with its held-out replay: the candidate when promoted, else the
 * incumbent.
 */
function productionHeldout(result: TrainingIterationResult): HeldoutResult | undefined {
  const { release } = result;
  if (!release) return undefined;
  if (release.promoted) return result.heldout ? heldoutResult(result.candidate, result.heldout) : undefined;
  return release.incumbentHeldout ? heldoutResult(release.incumbent, release.incumbentHeldout) : undefined;
}
