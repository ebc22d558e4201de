import type { ImportanceSampling } from './importance-sampling.js';

/** One sequence as the correction sees it; index t is token t (token 0 is never trained). */
export interface RatioSequence {
  lossMask: readonly number[];
  lossWeights: readonly number[];
  /** The sampler's journaled log-prob of each trained token. */
  oldLogprobs: readonly number[];
  /** The parent's log-prob of each token, from one pass before any step. */
  parentLogprobs: readonly number[];
}

export interface RatioStats {
  mean: number;
  min: number;
  max: number;
}

/** What the trainers report about the correction (`importanceWeights` in their result). */
export interface ImportanceReport {
  mode: ImportanceSampling['mode'];
  level: ImportanceSampling['level'];
  cap: number;
  band?: [number, number];
  /** Mean over trained tokens of the factor applied to the weight (0 where masked). */
  mean: number;
  /** Share of trained tokens kept whose ratio was above the cap. */
  cappedFraction: number;
  /** Share of trained tokens whose weight the mask set to 0. */
  maskedFraction: number;
  /** The per-token ratio r over trained tokens. */
  ratio: RatioStats;
  tokens: number;
  /**
   * Over sequences with a trained token: the sequence ratio exp(mean log-ratio), and the share
   * with at least one trained token masked (under level sequence: the sequences masked).
   */
  sequences: { count: number; ratio: RatioStats; maskedFraction: number };
}

/**
 * The importance factors of docs/training-objective.md: w_t ← w_t · min(r_t, cap) on kept tokens,
 * 0 on masked ones. Plain float64 arithmetic in a fixed order, as trainer/rein_trainer/objective.py
 * does it.
 */
export function importanceWeights(
  sequences: readonly RatioSequence[],
  sampling: ImportanceSampling,
): { lossWeights: number[][]; report: ImportanceReport } {
  const tokens = new Accumulator();
  const perSequence = new Accumulator();
  let factorSum = 0;
  let capped = 0;
  let masked = 0;
  let maskedSequences = 0;
  const lossWeights = sequences.map((s) => {
    const trained = s.lossMask.map((m, t) => m === 1 && t > 0);
    const logRatio = s.lossMask.map((_, t) => (s.parentLogprobs[t] as number) - (s.oldLogprobs[t] as number));
    let sum = 0;
    let count = 0;
    for (let t = 0; t < trained.length; t++) {
      if (!trained[t]) continue;
      sum += logRatio[t] as number;
      count++;
    }
    const sequenceRatio = Math.exp(count === 0 ? 0 : sum / count);
    if (count > 0) perSequence.add(sequenceRatio);
    let anyMasked = false;
    const weights = s.lossWeights.map((w, t) => {
      if (!trained[t]) return w;
      const ratio = Math.exp(logRatio[t] as number);
      tokens.add(ratio);
      const judged = sampling.level === 'sequence' ? sequenceRatio : ratio;
      if (sampling.band && (judged < sampling.band[0] || judged > sampling.band[1])) {
        masked++;
        anyMasked = true;
        return 0;
      }
      if (ratio > sampling.cap) capped++;
      const factor = Math.min(ratio, sampling.cap);
      factorSum += factor;
      return w * factor;
    });
    if (anyMasked) maskedSequences++;
    return weights;
  });
  const share = (n: number, of: number) => (of === 0 ? 0 : n / of);
  return {
    lossWeights,
    report: {
      mode: sampling.mode,
      level: sampling.level,
      cap: sampling.cap,
      ...(sampling.band && { band: sampling.band }),
      mean: tokens.count === 0 ? 1 : factorSum / tokens.count,
      cappedFraction: share(capped, tokens.count),
      maskedFraction: share(masked, tokens.count),
      ratio: tokens.stats(),
      tokens: tokens.count,
      sequences: {
        count: perSequence.count,
        ratio: perSequence.stats(),
        maskedFraction: share(maskedSequences, perSequence.count),
      },
    },
  };
}

class Accumulator {
  count = 0;
  private sum = 0;
  private min = Infinity;
  private max = -Infinity;

  add(value: number): void {
    this.count++;
    this.sum += value;
    this.min = Math.min(this.min, value);
    this.max = Math.max(this.max, value);
  }

  /** Mean, min and max; all 1 (no correction) when nothing was added. */
  stats(): RatioStats {
    return this.count === 0
      ? { mean: 1, min: 1, max: 1 }
      : { mean: this.sum / this.count, min: this.min, max: this.max };
  }
}
