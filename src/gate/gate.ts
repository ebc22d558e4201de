/**
 * The promotion gate: may a candidate policy replace the incumbent? Both are replayed on the same
 * held-out tasks, k samples each, and compared pair by pair (task + sample index). The candidate
 * must accept more tasks, bring no new critical failure class, cost not much more per rollout, and
 * have a reward its harness and verifier agree on.
 */
import { isFinished, type FailureClass } from '../rollouts/rollout.js';
import { DEFAULT_SEVERITY, type GateRules, type Severity } from './config.js';
import { mcnemarExactP, pairedBootstrap } from './paired-tests.js';
import type { RolloutFacts } from './rollout-facts.js';

/** A class's severity: as configured, else its default (critical for irreversible and permission), else minor. */
export function severityOf(rules: Pick<GateRules, 'severity'>, failureClass: FailureClass): Severity {
  return rules.severity[failureClass] ?? DEFAULT_SEVERITY[failureClass] ?? 'minor';
}

/** The gate's input is malformed (unpaired, duplicated, unfinished or empty replays); no decision is possible. */
export class GateInputError extends Error {
  override name = 'GateInputError';
}

export interface RolloutPair {
  taskId: string;
  sample: number;
  incumbent: RolloutFacts;
  candidate: RolloutFacts;
}

/**
 * Matches each incumbent rollout with the candidate rollout of the same task and sample index.
 * Every rollout must have exactly one partner: an unpaired one would bias the comparison towards
 * whichever policy finished more of the hard tasks.
 */
export function pairOutcomes(incumbent: readonly RolloutFacts[], candidate: readonly RolloutFacts[]): RolloutPair[] {
  if (incumbent.length === 0 || candidate.length === 0) {
    throw new GateInputError(
      `the gate needs replays of both policies (incumbent: ${incumbent.length} rollouts, candidate: ${candidate.length})`,
    );
  }
  const incumbentByKey = indexByTaskAndSample(incumbent, 'incumbent');
  const candidateByKey = indexByTaskAndSample(candidate, 'candidate');
  const pairs: RolloutPair[] = [];
  for (const [key, inc] of incumbentByKey) {
    const cand = candidateByKey.get(key);
    if (!cand)
      throw new GateInputError(
        `task ${inc.taskId} sample ${inc.sample} has no candidate rollout (incumbent rollout ${inc.rolloutId})`,
      );
    pairs.push({ taskId: inc.taskId, sample: inc.sample, incumbent: inc, candidate: cand });
  }
  for (const [key, cand] of candidateByKey) {
    if (!incumbentByKey.has(key)) {
      throw new GateInputError(
        `task ${cand.taskId} sample ${cand.sample} has no incumbent rollout (candidate rollout ${cand.rolloutId})`,
      );
    }
  }
  return pairs;
}

function indexByTaskAndSample(rollouts: readonly RolloutFacts[], side: string): Map<string, RolloutFacts> {
  const byKey = new Map<string, RolloutFacts>();
  for (const rollout of rollouts) {
    if (!isFinished(rollout.status)) {
      throw new GateInputError(
        `${side} rollout ${rollout.rolloutId} (task ${rollout.taskId} sample ${rollout.sample}) has not finished (${rollout.status})`,
      );
    }
    const key = JSON.stringify([rollout.taskId, rollout.sample]);
    const seen = byKey.get(key);
    if (seen) {
      throw new GateInputError(
        `task ${rollout.taskId} sample ${rollout.sample} has two ${side} rollouts: ${seen.rolloutId} and ${rollout.rolloutId}`,
      );
    }
    byKey.set(key, rollout);
  }
  return byKey;
}

/** `insufficient`: too few pairs were scored on both sides to compare the policies; no decision either way. */
export const VERDICTS = ['pass', 'fail', 'insufficient'] as const;
export type Verdict = (typeof VERDICTS)[number];

export type GateCheckName =
  'scored' | 'gain' | 'critical_failures' | 'tokens' | 'steps' | 'latency' | 'reward_disagreement';

export interface GateCheck {
  name: GateCheckName;
  passed: boolean;
  detail: string;
  /** The rollout ids behind this check's numbers. */
  rollouts: string[];
}

export interface SidePair<T> {
  incumbent: T;
  candidate: T;
}

/** How the scored pairs compare; absent when no pair was scored on both sides. */
export interface GateComparison {
  acceptedRate: SidePair<number>;
  gain: {
    test: GateRules['gain']['test'];
    /** Candidate accepted rate - incumbent accepted rate. */
    estimate: number;
    lower?: number;
    upper?: number;
    pValue?: number;
    /** Pairs the incumbent did not accept and the candidate did. */
    gained: number;
    /** Pairs the incumbent accepted and the candidate did not. */
    lost: number;
  };
  failureClasses: SidePair<Record<string, number>> & { newCritical: string[] };
  meanTokens: SidePair<number>;
  meanSteps: SidePair<number>;
  meanLatencyMs: SidePair<number>;
  /** Share of rollouts whose harness-reported reward disagreed with the verifier. */
  rewardDisagreement: SidePair<number>;
}

export interface GateDecision {
  verdict: Verdict;
  /** One sentence per failed check, with its numbers. */
  reasons: string[];
  checks: GateCheck[];
  evidence: {
    /** All pairs replayed; the comparison is over the scored ones only. */
    pairs: number;
    tasks: number;
    scored: {
      pairs: number;
      /** Why rollouts went unscored, by failure class (or `cancelled`), per side. */
      unscored: SidePair<Record<string, number>>;
    };
  } & Partial<GateComparison>;
}

/** At most this many rollout ids back a cost check: enough to open a few traces, not a dump. */
const MAX_COST_ROLLOUTS = 20;

/** A rollout is scored when the verifier gave it a reward; the policy's own failures are scored too. */
export const isScored = (r: RolloutFacts): boolean => r.reward !== null;

export function evaluateGate(rules: GateRules, allPairs: readonly RolloutPair[]): GateDecision {
  if (allPairs.length === 0) throw new GateInputError('the gate needs at least one pair of rollouts');
  // A rollout Rein's own machinery lost says nothing about the policy: comparing it as a failure
  // would hand the other side a win it did not earn. Only pairs scored on both sides are compared.
  const pairs = allPairs.filter((p) => isScored(p.incumbent) && isScored(p.candidate));
  const scored = scoredCheck(rules, allPairs, pairs);
  const replayed = {
    pairs: allPairs.length,
    tasks: new Set(allPairs.map((p) => p.taskId)).size,
    scored: scored.evidence,
  };
  if (pairs.length === 0)
    return { verdict: 'insufficient', reasons: [scored.check.detail], checks: [scored.check], evidence: replayed };
  const incumbent = pairs.map((p) => p.incumbent);
  const candidate = pairs.map((p) => p.candidate);
  const accepted = (r: RolloutFacts): boolean => r.reward !== null && r.reward >= rules.acceptReward;

  const gain = gainCheck(rules, pairs, accepted);
  const critical = criticalFailuresCheck(rules, incumbent, candidate);
  const costs = [
    costCheck('tokens', 'tokens', rules.maxRegression.tokens, incumbent, candidate, (r) => r.tokens),
    costCheck('steps', 'model calls', rules.maxRegression.steps, incumbent, candidate, (r) => r.steps),
    costCheck('latency', 'ms of latency', rules.maxRegression.latency, incumbent, candidate, (r) => r.latencyMs),
  ];
  const disagreement = rewardDisagreementCheck(rules, incumbent, candidate);

  const checks = [
    scored.check,
    gain.check,
    critical.check,
    ...costs.flatMap((c) => (c.check ? [c.check] : [])),
    disagreement.check,
  ];
  // Too little evidence is its own verdict: the comparisons are shown but decide nothing.
  const reasons = scored.check.passed ? checks.filter((c) => !c.passed).map((c) => c.detail) : [scored.check.detail];
  return {
    verdict: !scored.check.passed ? 'insufficient' : reasons.length === 0 ? 'pass' : 'fail',
    reasons,
    checks,
    evidence: {
      ...replayed,
      acceptedRate: gain.acceptedRate,
      gain: gain.evidence,
      failureClasses: critical.evidence,
      meanTokens: costs[0]!.means,
      meanSteps: costs[1]!.means,
      meanLatencyMs: costs[2]!.means,
      rewardDisagreement: disagreement.evidence,
    },
  };
}

function scoredCheck(rules: GateRules, allPairs: readonly RolloutPair[], scoredPairs: readonly RolloutPair[]) {
  const unscoredOf = (side: 'incumbent' | 'candidate') => {
    const counts: Record<string, number> = {};
    for (const p of allPairs) {
      const r = p[side];
      if (isScored(r)) continue;
      const cause = r.status === 'cancelled' ? 'cancelled' : (r.failureClass ?? r.status);
      counts[cause] = (counts[cause] ?? 0) + 1;
    }
    return counts;
  };
  const unscored = { incumbent: unscoredOf('incumbent'), candidate: unscoredOf('candidate') };
  const share = scoredPairs.length / allPairs.length;
  const passed = share >= rules.minScoredShare;
  const causes = (counts: Record<string, number>) => {
    const parts = Object.entries(counts).map(([cause, n]) => `${n} ${cause}`);
    return parts.length === 0 ? 'none' : parts.join(', ');
  };
  const numbers = `${scoredPairs.length} of ${allPairs.length} pairs (${pct(share)}) were scored on both sides; unscored rollouts: candidate ${causes(unscored.candidate)}; incumbent ${causes(unscored.incumbent)}`;
  const detail = passed
    ? `Evidence: ${numbers}; the comparison uses the scored pairs only.`
    : `Insufficient evidence: ${numbers}, below the required ${pct(rules.minScoredShare)}. These rollouts were lost to a fault, not failed by a policy; fix the fault and replay (unscored rollouts run again, scored ones are kept).`;
  const rollouts = allPairs
    .flatMap((p) => [p.incumbent, p.candidate])
    .filter((r) => !isScored(r))
    .map((r) => r.rolloutId);
  return {
    check: { name: 'scored' as const, passed, detail, rollouts },
    evidence: { pairs: scoredPairs.length, unscored },
  };
}

function gainCheck(rules: GateRules, pairs: readonly RolloutPair[], accepted: (r: RolloutFacts) => boolean) {
  const { test, minGain } = rules.gain;
  const outcomes = pairs.map((p) => ({
    task: p.taskId,
    incumbent: accepted(p.incumbent) ? 1 : 0,
    candidate: accepted(p.candidate) ? 1 : 0,
  }));
  const acceptedRate = {
    incumbent: mean(outcomes.map((o) => o.incumbent)),
    candidate: mean(outcomes.map((o) => o.candidate)),
  };
  const gainedPairs = pairs.filter((_, i) => outcomes[i]!.incumbent === 0 && outcomes[i]!.candidate === 1);
  const lostPairs = pairs.filter((_, i) => outcomes[i]!.incumbent === 1 && outcomes[i]!.candidate === 0);
  const rollouts = [...gainedPairs, ...lostPairs].flatMap((p) => [p.incumbent.rolloutId, p.candidate.rolloutId]);
  const rates = `the candidate accepted ${pct(acceptedRate.candidate)} of ${pairs.length} rollouts against the incumbent's ${pct(acceptedRate.incumbent)} (${gainedPairs.length} gained, ${lostPairs.length} lost)`;
  const base = { test, gained: gainedPairs.length, lost: lostPairs.length };

  if (test === 'bootstrap') {
    const { gain, lower, upper } = pairedBootstrap(outcomes, rules.gain);
    const passed = lower > minGain;
    const interval = `the gain of ${points(gain)} has a ${pct(rules.gain.confidence, 0)} interval [${points(lower)}, ${points(upper)}]`;
    const detail = passed
      ? `Gain: ${rates}; ${interval}, above ${points(minGain)}.`
      : `Gain too small: ${rates}; ${interval}, whose lower bound is not above ${points(minGain)}.`;
    return {
      check: { name: 'gain' as const, passed, detail, rollouts },
      acceptedRate,
      evidence: { ...base, estimate: gain, lower, upper },
    };
  }

  const estimate = acceptedRate.candidate - acceptedRate.incumbent;
  const pValue = mcnemarExactP(gainedPairs.length, lostPairs.length);
  const significant = pValue < rules.gain.alpha;
  const passed = significant && estimate > minGain;
  const stats = `the gain is ${points(estimate)}, one-sided McNemar p = ${pValue.toPrecision(3)}`;
  const why = !significant ? `not below alpha ${rules.gain.alpha}` : `but the gain is not above ${points(minGain)}`;
  const detail = passed
    ? `Gain: ${rates}; ${stats} < ${rules.gain.alpha}.`
    : `Gain not shown: ${rates}; ${stats}, ${why}.`;
  return {
    check: { name: 'gain' as const, passed, detail, rollouts },
    acceptedRate,
    evidence: { ...base, estimate, pValue },
  };
}

function criticalFailuresCheck(
  rules: GateRules,
  incumbent: readonly RolloutFacts[],
  candidate: readonly RolloutFacts[],
) {
  const incumbentCounts = countClasses(incumbent);
  const candidateCounts = countClasses(candidate);
  const criticalSeen = Object.keys(candidateCounts).filter((c) => severityOf(rules, c as FailureClass) === 'critical');
  // A critical class the incumbent already shows is a known risk of production, not something the
  // candidate brings; it is reported but does not block the promotion.
  const newCritical = criticalSeen.filter((c) => !(c in incumbentCounts)).sort();
  const known = criticalSeen.filter((c) => c in incumbentCounts).sort();
  const knownNote =
    known.length === 0
      ? ''
      : ` Critical classes both policies show: ${known.map((c) => `${c} (candidate ${candidateCounts[c]}, incumbent ${incumbentCounts[c]})`).join(', ')}.`;
  const passed = newCritical.length === 0;
  const rollouts = candidate
    .filter((r) => r.failureClass !== null && newCritical.includes(r.failureClass))
    .map((r) => r.rolloutId);
  const detail = passed
    ? `No new critical failure class.${knownNote}`
    : `New critical failure class: ${newCritical.map((c) => `${c} in ${candidateCounts[c]} of ${candidate.length} candidate rollouts`).join(', ')}, none in the incumbent's.${knownNote}`;
  return {
    check: { name: 'critical_failures' as const, passed, detail, rollouts },
    evidence: { incumbent: incumbentCounts, candidate: candidateCounts, newCritical },
  };
}

/**
 * The relative increase of the candidate's mean over the incumbent's. When the incumbent's mean is
 * 0 there is no scale to be relative to: any candidate cost above 0 counts as an infinite increase
 * (fails every limit), and 0 against 0 as none.
 */
function costCheck(
  name: 'tokens' | 'steps' | 'latency',
  unit: string,
  limit: number | null,
  incumbent: readonly RolloutFacts[],
  candidate: readonly RolloutFacts[],
  cost: (r: RolloutFacts) => number,
) {
  const means = { incumbent: mean(incumbent.map(cost)), candidate: mean(candidate.map(cost)) };
  if (limit === null) return { means, check: undefined };
  const increase =
    means.incumbent > 0 ? (means.candidate - means.incumbent) / means.incumbent : means.candidate > 0 ? Infinity : 0;
  const passed = increase <= limit;
  const rollouts = candidate
    .filter((r) => cost(r) > means.incumbent)
    .sort((a, b) => cost(b) - cost(a))
    .slice(0, MAX_COST_ROLLOUTS)
    .map((r) => r.rolloutId);
  const change = Number.isFinite(increase) ? `${increase >= 0 ? '+' : ''}${pct(increase)}` : 'an increase from 0';
  const comparison = `the candidate's mean of ${round(means.candidate)} ${unit} per rollout against the incumbent's ${round(means.incumbent)} is ${change}`;
  const detail = passed
    ? `Cost (${name}): ${comparison}, within +${pct(limit)}.`
    : `Cost regression (${name}): ${comparison}, over the allowed +${pct(limit)}.`;
  return { means, check: { name, passed, detail, rollouts } satisfies GateCheck };
}

function rewardDisagreementCheck(
  rules: GateRules,
  incumbent: readonly RolloutFacts[],
  candidate: readonly RolloutFacts[],
) {
  const disagreeing = candidate.filter((r) => r.rewardDisagrees);
  const evidence = {
    incumbent: incumbent.filter((r) => r.rewardDisagrees).length / incumbent.length,
    candidate: disagreeing.length / candidate.length,
  };
  const passed = evidence.candidate <= rules.maxRewardDisagreement;
  const share = `${disagreeing.length} of ${candidate.length} candidate rollouts (${pct(evidence.candidate)}) had a harness-reported reward the verifier did not give (incumbent: ${pct(evidence.incumbent)})`;
  const detail = passed
    ? `Reward agreement: ${share}, within ${pct(rules.maxRewardDisagreement)}.`
    : `Reward disagreement: ${share}, over the allowed ${pct(rules.maxRewardDisagreement)}.`;
  return {
    check: { name: 'reward_disagreement' as const, passed, detail, rollouts: disagreeing.map((r) => r.rolloutId) },
    evidence,
  };
}

function countClasses(rollouts: readonly RolloutFacts[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of rollouts) if (r.failureClass !== null) counts[r.failureClass] = (counts[r.failureClass] ?? 0) + 1;
  return counts;
}

function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}

function pct(fraction: number, digits = 1): string {
  return `${(fraction * 100).toFixed(digits)}%`;
}

function points(fraction: number): string {
  return `${fraction >= 0 ? '+' : ''}${(fraction * 100).toFixed(1)} points`;
}

function round(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}
