import { UNSCORED_FAILURE_CLASSES } from '../rollouts/failure-classes.js';

/**
 * What the rigger reads: one training rollout of the last iterations, as the lead builds it from
 * the rollout's outcome and its `environment` event (SessionSummary). Plain data, so the rigger
 * is a pure function of it and a run's report can be recomputed from its ledger.
 */
export interface RolloutEvidence {
  taskId: string;
  iteration: number;
  /** The variant's id it ran in (SessionSummary.variant), null in the original environment. */
  variant: string | null;
  reward: number | null;
  /** null when the rollout was not scored (its failure was Rein's machinery, not the policy). */
  success: boolean | null;
  failureClass: string | null;
  /** Tool calls the attempt made (SessionSummary.steps), null when it ran without an environment. */
  steps: number | null;
  toolCalls: Record<string, { calls: number; errors: number }>;
  /** See isGiveUp. */
  gaveUp: boolean;
}

/** One recurring weakness, with the numbers that support it. */
export interface Weakness {
  kind: WeaknessKind;
  /** What it is about: a tool's name, "runs", a group of tasks, a failure class. */
  subject: string;
  /** What was counted (per kind: failed calls, give-ups, long solved runs, tasks, failures). */
  count: number;
  /** count over what it is a share of (per kind: calls, failures, solved runs, sampled tasks, failures). */
  share: number;
  /** A short sentence with the numbers, for the run report. */
  detail: string;
  /**
   * The share of the window's scored rollouts it accounts for: failed ones count 1, long solved
   * ones ½ (they succeeded, only slowly). One scale for every kind, so they sort together.
   */
  severity: number;
  /** The environment's tools it concerns (the failing tool; the tools long runs use most). */
  tools: string[];
  /** The tasks it concerns (task_failures), sorted. */
  tasks: string[];
}

export type WeaknessKind = 'tool_errors' | 'gives_up' | 'long_episodes' | 'task_failures' | 'format';

/** What a finished attempt showed, as isGiveUp reads it. */
export interface EndedAttempt {
  success: boolean | null;
  failureClass: string | null;
  steps: number | null;
  /** Tool calls answered with an error (SessionSummary.errors). */
  toolErrors: number;
  /** Whether the harness gave a final answer the verifier could check. */
  answered: boolean;
  /** Whether the model's last reply was a refusal (failure class `model` by a refusal pattern). */
  refused: boolean;
}

/** Failures that say nothing about persistence: the run was stopped, crashed or never scored. */
const NOT_A_GIVE_UP = new Set<string>(['timeout', 'harness', 'irreversible', ...UNSCORED_FAILURE_CLASSES]);

/** Below this fraction of the task's typical solved run (its median steps), stopping is giving up. */
export const GIVE_UP_STEP_FRACTION = 0.5;

/**
 * Whether a failed run gave up rather than failed honestly. The paper this follows warns that an
 * agent that gives up early also uses fewer steps, so "fewer steps" must be read beside this.
 *
 * The rule: the run was scored and did not succeed, its failure is not a timeout, a crash, an
 * irreversible action or Rein's machinery (those runs were stopped, not quitting), and one of:
 *   1. the model's last reply was a refusal;
 *   2. it ended with no tool error and no answer (nothing went wrong, it just stopped);
 *   3. it made fewer than half the tool calls the task's solved runs typically make (their median,
 *      `typicalSolvedSteps`; see typicalSolvedSteps): it answered before doing what solving takes.
 * Half, not "fewer than the median", so a run that did most of the work and answered wrong counts
 * as an honest failure. Rule 3 does not apply when the steps or the typical count are unknown.
 */
export function isGiveUp(attempt: EndedAttempt, typicalSolvedSteps: number | null): boolean {
  if (attempt.success !== false) return false;
  if (attempt.failureClass !== null && NOT_A_GIVE_UP.has(attempt.failureClass)) return false;
  if (attempt.refused) return true;
  if (attempt.toolErrors === 0 && !attempt.answered) return true;
  return (
    attempt.steps !== null && typicalSolvedSteps !== null && attempt.steps < typicalSolvedSteps * GIVE_UP_STEP_FRACTION
  );
}

/** Each task's median tool calls over its solved runs (isGiveUp's `typicalSolvedSteps`); unsolved tasks are absent. */
export function typicalSolvedSteps(
  runs: ReadonlyArray<{ taskId: string; success: boolean | null; steps: number | null }>,
): Map<string, number> {
  const solvedSteps = new Map<string, number[]>();
  for (const run of runs) {
    if (run.success !== true || run.steps === null) continue;
    const steps = solvedSteps.get(run.taskId) ?? [];
    steps.push(run.steps);
    solvedSteps.set(run.taskId, steps);
  }
  return new Map([...solvedSteps].map(([taskId, steps]) => [taskId, median(steps)]));
}

/** The middle value (the mean of the two middle ones for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** A share as the report prints it: 0.4 → "40%". */
export const percent = (share: number): string => `${Math.round(share * 100)}%`;
