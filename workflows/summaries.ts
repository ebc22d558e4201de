import type { GateSummary } from '../activities/release.js';

/**
 * One-line summaries the Temporal Web UI shows at a glance (a workflow's summary and current
 * details), e.g. "it2: run-1.v2 gate PASS 46.9% → 56.3%, promoted". Plain functions of small
 * data, so workflows stay deterministic and the CLI can print the same words.
 */
export interface GateLine {
  verdict: GateSummary['verdict'];
  promoted: boolean;
  acceptedRate?: GateSummary['acceptedRate'];
}

const percent = (x: number) => `${(100 * x).toFixed(1)}%`;

/**
 * "gate PASS 46.9% → 56.3%, promoted": the verdict, held-out success of production → candidate, and what became of it.
 */
export function gateLine(gate: GateLine): string {
  const rates = gate.acceptedRate
    ? ` ${percent(gate.acceptedRate.incumbent)} → ${percent(gate.acceptedRate.candidate)}`
    : '';
  const outcome = gate.promoted
    ? 'promoted'
    : gate.verdict === 'pass'
      ? 'not promoted (gate.autoPromote is off)'
      : 'not promoted';
  return `gate ${gate.verdict.toUpperCase()}${rates}, ${outcome}`;
}

/** An iteration in one line: what it trained, and the gate's verdict when there was one. */
export function iterationSummary(it: {
  iteration: number;
  candidate: string | null;
  meanReward: number | null;
  gate?: GateLine;
  failed?: string;
}): string {
  if (it.failed !== undefined) return `it${it.iteration}: failed (${it.failed})`;
  const reward = it.meanReward === null ? '-' : it.meanReward.toFixed(3);
  return `it${it.iteration}: ${it.candidate ?? '-'} train reward ${reward}${it.gate ? `; ${gateLine(it.gate)}` : ''}`;
}

type ByClass = Record<string, number>;
type SetFailures = { byFailureClass: ByClass; failureReasons?: Record<string, string> };

/**
 * Failed rollouts by failure class for each stage of an iteration that ran rollouts: training
 * rollouts, the candidate's held-out replay, production's held-out replay. Stages without a
 * failure are left out, so an empty object means nothing failed.
 */
export function failuresByStage(result: IterationSets): Record<string, ByClass> {
  return byStage(result, (set) => set.byFailureClass);
}

/** For each stage of failuresByStage, one failed rollout's reason per failure class (where the summary has them). */
export function failureReasonsByStage(result: IterationSets): Record<string, Record<string, string>> {
  return byStage(result, (set) => set.failureReasons ?? {});
}

interface IterationSets {
  rollouts: SetFailures;
  heldout: SetFailures | null;
  release: { incumbentHeldout?: SetFailures } | null;
}

function byStage<T>(
  result: IterationSets,
  pick: (set: SetFailures) => Record<string, T>,
): Record<string, Record<string, T>> {
  const stages: Array<[string, SetFailures | undefined]> = [
    ['rollouts', result.rollouts],
    ['heldout', result.heldout ?? undefined],
    ['heldout-production', result.release?.incumbentHeldout],
  ];
  return Object.fromEntries(
    stages.flatMap(([stage, set]) => {
      const picked = set === undefined ? {} : pick(set);
      return Object.keys(picked).length > 0 ? [[stage, picked]] : [];
    }),
  );
}
