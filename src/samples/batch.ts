import { computeAdvantages, type AdvantageEstimator } from './advantages.js';
import { sequenceWeights, type LossAggregation } from './loss-weights.js';
import { stepSequences, type MergeMode } from './merge-modes.js';
import { mergeRollout, type Detokenizer, type MergeCall, type MismatchCause, type TrainingSequence } from './merge.js';

/** One rollout as the batch stage sees it: its outcome and its journaled calls, in order. */
export interface BatchRollout {
  rolloutId: string;
  /** Rollouts of one task form an advantage group. */
  groupId: string;
  /** Null when the rollout has no trustworthy reward (no verifier result). */
  reward: number | null;
  /** Failure class when the rollout failed (see the runner), or null. */
  failureClass: string | null;
  calls: MergeCall[];
}

export interface BatchOptions {
  /** How calls become sequences (see merge-modes.ts); exact when not given. */
  merge?: MergeMode;
  estimator: AdvantageEstimator;
  zeroVarianceGroups: 'drop' | 'keep';
  lossAggregation: LossAggregation;
  /** C of seq-mean-token-sum-norm; defaults to maxResponseTokens. */
  normConstant?: number;
  /** A sequence whose first prompt is longer is dropped (and its rollout counts as truncated). */
  maxPromptTokens: number;
  /** A sequence is cut this many tokens after its first prompt (and its rollout counts as truncated). */
  maxResponseTokens: number;
  /**
   * A truncated or unfinished rollout gets no outcome reward: its tokens are masked (kept in the
   * batch, weight 0), dropped, or trained with reward 0.
   */
  truncated: 'mask' | 'drop' | 'zero_reward';
  /** Failure classes whose rollouts are not the policy's doing and are left out of training. */
  excludedFailureClasses: string[];
  /** When some rollouts of a group are left out: keep the rest as a smaller group, or drop the group. */
  incompleteGroups: 'keep' | 'drop';
  /**
   * Policy versions oldest → newest, and how far behind the newest a rollout may be (no bound when
   * not given: the report still counts the kept rollouts by versions behind).
   */
  staleness?: { lineage: string[]; maxVersionsBehind?: number };
  epsilon?: number;
}

export type ExclusionReason =
  | 'no_reward'
  | 'excluded_failure_class'
  | 'stale_policy'
  | 'no_token_ids'
  | 'truncated'
  | 'zero_variance_group'
  | 'incomplete_group';

export interface BatchReport {
  rollouts: {
    total: number;
    used: number;
    excluded: Partial<Record<ExclusionReason, number>>;
    excludedIds: Partial<Record<ExclusionReason, string[]>>;
  };
  /** The merge mode the batch's sequences were built with. */
  merge: { mode: MergeMode };
  /**
   * Counted by exact prefix merging whatever the mode, as are mergeRate and mismatchCauses: under stepwise they say
   * what merging would have given (the reason to pick stepwise).
   */
  calls: { total: number; merged: number; skippedWithoutTokenIds: number; missingLogprobs: number };
  /** Calls that extended an earlier sequence, over calls that could have (all but each rollout's first). */
  mergeRate: number;
  mismatchCauses: Partial<Record<MismatchCause, number>>;
  /** The rollouts with at least one call of each cause (the rollout browser's merge-cause filter). */
  mismatchRolloutIds: Partial<Record<MismatchCause, string[]>>;
  truncatedRollouts: number;
  zeroVarianceGroups: number;
  sequences: number;
  tokens: { total: number; trained: number };
  rewards: { count: number; mean: number; std: number; min: number; max: number } | null;
  /**
   * With the lineage known: the bound, and the kept rollouts by how many versions their oldest call's policy is
   * behind the trained one ("0", "1", …; "unknown" for a policy outside the lineage). Null without a lineage.
   */
  staleness: { maxVersionsBehind: number | null; keptByVersionsBehind: Record<string, number> } | null;
}

export interface Batch {
  sequences: Array<TrainingSequence & { advantage: number; weight: number }>;
  report: BatchReport;
}

/** One rollout after merging: what the batch keeps of it (sequences, not calls), or why it is out. */
export interface PreparedRollout {
  rolloutId: string;
  groupId: string;
  reward: number | null;
  excluded: ExclusionReason | null;
  sequences: TrainingSequence[];
  truncated: boolean;
  calls: number;
  mergedCalls: number;
  mergeableCalls: number;
  skippedCalls: number;
  missingLogprobs: number;
  mismatchCauses: Partial<Record<MismatchCause, number>>;
  /** Versions behind the newest of the lineage ("unknown" outside it); null without staleness options. */
  versionsBehind: number | 'unknown' | null;
}

/**
 * Merges one rollout and applies the per-rollout rules. Callers that read rollouts one at a time
 * (the batch stage) keep only this, so a batch never holds every call's whole prompt at once.
 */
export function prepareRollout(rollout: BatchRollout, options: BatchOptions, tokenizer: Detokenizer): PreparedRollout {
  const prepared: PreparedRollout = {
    rolloutId: rollout.rolloutId,
    groupId: rollout.groupId,
    reward: rollout.reward,
    excluded: null,
    sequences: [],
    truncated: false,
    calls: rollout.calls.length,
    mergedCalls: 0,
    mergeableCalls: 0,
    skippedCalls: 0,
    missingLogprobs: 0,
    mismatchCauses: {},
    versionsBehind: options.staleness ? versionsBehind(rollout.calls, options.staleness.lineage) : null,
  };
  const out = (reason: ExclusionReason): PreparedRollout => ({ ...prepared, excluded: reason, sequences: [] });
  if (rollout.failureClass && options.excludedFailureClasses.includes(rollout.failureClass))
    return out('excluded_failure_class');
  if (rollout.reward === null) return out('no_reward');
  if (isStale(prepared.versionsBehind, options.staleness?.maxVersionsBehind)) return out('stale_policy');

  const merge = mergeRollout(rollout.rolloutId, rollout.calls, tokenizer);
  prepared.mergedCalls = merge.mergedCalls;
  prepared.mergeableCalls = Math.max(0, rollout.calls.length - merge.skippedCalls.length - 1);
  prepared.skippedCalls = merge.skippedCalls.length;
  prepared.missingLogprobs = merge.missingLogprobs;
  for (const m of merge.mismatches) prepared.mismatchCauses[m.cause] = (prepared.mismatchCauses[m.cause] ?? 0) + 1;
  if (merge.sequences.length === 0) return out('no_token_ids');

  // Stepwise trains each call on its own; the merge above still measured what merging would give.
  const built = options.merge === 'stepwise' ? stepSequences(rollout.rolloutId, rollout.calls) : merge.sequences;
  const limited = limitLengths(built, options);
  prepared.truncated =
    limited.truncated ||
    merge.sequences.some((s) => s.spans.some((span) => span.finishReason === 'length' || span.finishReason === null));
  if (prepared.truncated && options.truncated === 'drop') return out('truncated');
  prepared.sequences = limited.sequences;
  return prepared;
}

export function buildBatch(rollouts: readonly BatchRollout[], options: BatchOptions, tokenizer: Detokenizer): Batch {
  return assembleBatch(
    rollouts.map((r) => prepareRollout(r, options, tokenizer)),
    options,
  );
}

/** Across rollouts: group rules, advantages, loss weights, and the report. */
export function assembleBatch(prepared: readonly PreparedRollout[], options: BatchOptions): Batch {
  const excluded = new Map<string, ExclusionReason>();
  const exclude = (id: string, reason: ExclusionReason) => excluded.has(id) || excluded.set(id, reason);
  const mismatchCauses: Partial<Record<MismatchCause, number>> = {};
  const mismatchRolloutIds: Partial<Record<MismatchCause, string[]>> = {};
  for (const p of prepared) {
    if (p.excluded) exclude(p.rolloutId, p.excluded);
    for (const [cause, n] of Object.entries(p.mismatchCauses) as Array<[MismatchCause, number]>) {
      mismatchCauses[cause] = (mismatchCauses[cause] ?? 0) + n;
      (mismatchRolloutIds[cause] ??= []).push(p.rolloutId);
    }
  }
  const candidates = prepared.filter((p) => !p.excluded);

  if (options.incompleteGroups === 'drop') {
    const incomplete = new Set(prepared.filter((p) => p.excluded).map((p) => p.groupId));
    for (const c of candidates) if (incomplete.has(c.groupId)) exclude(c.rolloutId, 'incomplete_group');
  }

  const masked = (c: PreparedRollout) => c.truncated && options.truncated === 'mask';
  const scored = candidates.filter((c) => !excluded.has(c.rolloutId) && !masked(c));
  const advantages = computeAdvantages(
    scored.map((c) => ({
      rolloutId: c.rolloutId,
      groupId: c.groupId,
      reward: c.truncated ? 0 : (c.reward as number),
      trainedTokens: c.sequences.reduce((n, s) => n + trainedTokens(s), 0),
    })),
    { estimator: options.estimator, zeroVarianceGroups: options.zeroVarianceGroups, epsilon: options.epsilon ?? 1e-6 },
  );
  for (const id of advantages.dropped.keys()) exclude(id, 'zero_variance_group');

  // Truncated rollouts under 'mask' stay in the batch with no trained tokens.
  const kept = candidates.filter((c) => !excluded.has(c.rolloutId));
  const sequences = kept.flatMap((c) =>
    c.sequences.map((s) => ({
      ...s,
      lossMask: masked(c) ? s.lossMask.map(() => 0) : s.lossMask,
      advantage: masked(c) ? 0 : (advantages.byRollout.get(c.rolloutId) ?? 0),
    })),
  );
  const weights = sequenceWeights(
    sequences.map((s) => ({ rolloutId: s.rolloutId, trainedTokens: trainedTokens(s) })),
    options.lossAggregation,
    { normConstant: options.normConstant ?? options.maxResponseTokens },
  );

  const rewards = kept.map((c) => c.reward as number);
  const { excludedCounts, excludedIds } = exclusionsReport(excluded);
  const sum = (f: (p: PreparedRollout) => number) => prepared.reduce((n, p) => n + f(p), 0);
  const merged = sum((p) => p.mergedCalls);
  const mergeable = sum((p) => p.mergeableCalls);
  return {
    sequences: sequences.map((s, i) => ({ ...s, weight: weights[i] as number })),
    report: {
      merge: { mode: options.merge ?? 'exact' },
      rollouts: { total: prepared.length, used: kept.length, excluded: excludedCounts, excludedIds },
      calls: {
        total: sum((p) => p.calls),
        merged,
        skippedWithoutTokenIds: sum((p) => p.skippedCalls),
        missingLogprobs: sum((p) => p.missingLogprobs),
      },
      mergeRate: mergeable === 0 ? 1 : merged / mergeable,
      mismatchCauses,
      mismatchRolloutIds,
      truncatedRollouts: prepared.filter((p) => p.truncated).length,
      zeroVarianceGroups: advantages.zeroVarianceGroupIds.length,
      sequences: sequences.length,
      tokens: {
        total: sequences.reduce((n, s) => n + s.ids.length, 0),
        trained: sequences.reduce((n, s) => n + trainedTokens(s), 0),
      },
      rewards: rewards.length ? summary(rewards) : null,
      staleness: stalenessReport(kept, options),
    },
  };
}

// Masks are never changed once built (masking makes a new array), so counts can be kept by mask.
const trainedCounts = new WeakMap<number[], number>();

function trainedTokens(sequence: { lossMask: number[] }): number {
  let n = trainedCounts.get(sequence.lossMask);
  if (n === undefined) {
    n = 0;
    const mask = sequence.lossMask;
    for (let i = 0; i < mask.length; i++) n += mask[i] as number;
    trainedCounts.set(mask, n);
  }
  return n;
}

function exclusionsReport(excluded: ReadonlyMap<string, ExclusionReason>) {
  const excludedCounts: BatchReport['rollouts']['excluded'] = {};
  const excludedIds: BatchReport['rollouts']['excludedIds'] = {};
  for (const [id, reason] of excluded) {
    excludedCounts[reason] = (excludedCounts[reason] ?? 0) + 1;
    (excludedIds[reason] ??= []).push(id);
  }
  return { excludedCounts, excludedIds };
}

function stalenessReport(kept: readonly PreparedRollout[], options: BatchOptions): BatchReport['staleness'] {
  if (!options.staleness) return null;
  return {
    maxVersionsBehind: options.staleness.maxVersionsBehind ?? null,
    keptByVersionsBehind: countBy(kept.map((c) => String(c.versionsBehind))),
  };
}

/** How far the oldest policy that sampled a call is behind the lineage's newest. */
function versionsBehind(calls: readonly MergeCall[], lineage: readonly string[]): number | 'unknown' {
  let behind = 0;
  for (const call of calls) {
    const at = lineage.indexOf(call.policyVersion);
    if (at < 0) return 'unknown';
    behind = Math.max(behind, lineage.length - 1 - at);
  }
  return behind;
}

function isStale(behind: PreparedRollout['versionsBehind'], maxVersionsBehind: number | undefined): boolean {
  if (behind === null || maxVersionsBehind === undefined) return false;
  return behind === 'unknown' || behind > maxVersionsBehind;
}

/** Counts by key, keys in ascending numeric order ("unknown" last). */
function countBy(keys: readonly string[]): Record<string, number> {
  const counts = new Map<string, number>();
  for (const k of keys) counts.set(k, (counts.get(k) ?? 0) + 1);
  const order = (k: string) => (k === 'unknown' ? Infinity : Number(k));
  return Object.fromEntries([...counts].sort(([a], [b]) => order(a) - order(b)));
}

/** Applies the prompt and response limits; reports whether anything was cut. */
function limitLengths(
  sequences: TrainingSequence[],
  options: BatchOptions,
): { sequences: TrainingSequence[]; truncated: boolean } {
  let truncated = false;
  const out: TrainingSequence[] = [];
  for (const s of sequences) {
    const promptLength = s.lossMask.indexOf(1) < 0 ? s.ids.length : s.lossMask.indexOf(1);
    if (promptLength > options.maxPromptTokens) {
      truncated = true;
      continue;
    }
    const limit = promptLength + options.maxResponseTokens;
    if (s.ids.length <= limit) {
      out.push(s);
      continue;
    }
    truncated = true;
    out.push({
      ...s,
      ids: s.ids.slice(0, limit),
      lossMask: s.lossMask.slice(0, limit),
      oldLogprobs: s.oldLogprobs.slice(0, limit),
      spans: s.spans.filter((span) => span.start < limit).map((span) => ({ ...span, end: Math.min(span.end, limit) })),
    });
  }
  return { sequences: out, truncated };
}

function summary(values: number[]) {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const std = Math.sqrt(values.reduce((s, v) => s + (v - mean) ** 2, 0) / values.length);
  return { count: values.length, mean, std, min: Math.min(...values), max: Math.max(...values) };
}
