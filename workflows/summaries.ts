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

/**
 * Failed rollouts by failure class for each stage of an iteration that ran rollouts: training
 * rollouts, the candidate's held-out replay, production's held-out replay. Stages without a
 * failure are left out, so an empty object means nothing failed.
 */
export function failuresByStage(result: {
  rollouts: { byFailureClass: ByClass };
  heldout: { byFailureClass: ByClass } | null;
  release: { incumbentHeldout?: { byFailureClass: ByClass } } | null;
}): Record<string, ByClass> {
  const stages: Array<[string, ByClass | undefined]> = [
    ['rollouts', result.rollouts.byFailureClass],
    ['heldout', result.heldout?.byFailureClass],
    ['heldout-production', result.release?.incumbentHeldout?.byFailureClass],
  ];
  return Object.fromEntries(
    stages.filter((s): s is [string, ByClass] => s[1] !== undefined && Object.keys(s[1]).length > 0),
  );
}
