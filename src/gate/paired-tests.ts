import { seededRandom } from '../random.js';

/**
 * Tests for paired outcomes (the same tasks, before and after): only the discordant pairs carry
 * evidence, so the comparison counts tasks gained and tasks lost.
 */

/**
 * Exact one-sided McNemar test: the probability of at least `gained` gains among the
 * `gained + lost` discordant pairs if gains and losses were equally likely (no improvement).
 */
export function mcnemarExactP(gained: number, lost: number): number {
  if (!Number.isInteger(gained) || !Number.isInteger(lost) || gained < 0 || lost < 0) {
    throw new Error(`mcnemarExactP needs two non-negative integer counts, got ${gained} and ${lost}`);
  }
  const n = gained + lost;
  if (n === 0) return 1;
  // Sum in log space: binomial coefficients overflow long before n gets large.
  const logHalfN = n * Math.log(0.5);
  let p = 0;
  for (let k = gained; k <= n; k++) p += Math.exp(logChoose(n, k) + logHalfN);
  return Math.min(1, p);
}

function logChoose(n: number, k: number): number {
  let sum = 0;
  for (let i = 1; i <= k; i++) sum += Math.log(n - k + i) - Math.log(i);
  return sum;
}

/** Tasks whose outcome went from failure to success, and from success to failure. */
export function discordantPairs(
  before: Record<string, number>,
  after: Record<string, number>,
): { gained: string[]; lost: string[] } {
  const missing = Object.keys(before).filter((id) => !(id in after));
  if (missing.length > 0)
    throw new Error(`paired comparison: ${missing.length} task(s) have no outcome after, e.g. ${missing[0]}`);
  const ids = Object.keys(before);
  return {
    gained: ids.filter((id) => (before[id] ?? 0) <= 0 && (after[id] ?? 0) > 0),
    lost: ids.filter((id) => (before[id] ?? 0) > 0 && (after[id] ?? 0) <= 0),
  };
}

/** One paired observation: the same task (and sample) under the incumbent and the candidate. */
export interface PairedValue {
  task: string;
  incumbent: number;
  candidate: number;
}

export interface BootstrapOptions {
  /** Resampled data sets drawn. */
  resamples: number;
  /** Coverage of the percentile interval, in (0, 1). */
  confidence: number;
  /** Seed of the resampling; the same seed gives the same interval. */
  seed: number;
}

export interface BootstrapInterval {
  /** Mean of candidate - incumbent over all pairs. */
  gain: number;
  lower: number;
  upper: number;
}

/**
 * Paired bootstrap of the mean gain (candidate - incumbent) with a percentile interval.
 * Tasks, not pairs, are resampled: the k samples of one task share its difficulty, so treating
 * them as independent would make the interval too narrow.
 */
export function pairedBootstrap(pairs: readonly PairedValue[], options: BootstrapOptions): BootstrapInterval {
  const { resamples, confidence, seed } = options;
  if (pairs.length === 0) throw new Error('pairedBootstrap needs at least one pair');
  if (!Number.isInteger(resamples) || resamples < 1)
    throw new Error(`pairedBootstrap: resamples must be a positive integer, got ${resamples}`);
  if (!(confidence > 0 && confidence < 1))
    throw new Error(`pairedBootstrap: confidence must be in (0, 1), got ${confidence}`);

  const byTask = new Map<string, { sum: number; count: number }>();
  for (const pair of pairs) {
    const diff = pair.candidate - pair.incumbent;
    if (!Number.isFinite(diff)) throw new Error(`pairedBootstrap: task ${pair.task} has a non-finite value`);
    const group = byTask.get(pair.task) ?? { sum: 0, count: 0 };
    group.sum += diff;
    group.count += 1;
    byTask.set(pair.task, group);
  }
  const tasks = [...byTask.values()];
  // Summed task by task, as the resamples are, so both round alike.
  const gain = ratioOfSums(tasks);

  const random = seededRandom(seed);
  const stats = new Float64Array(resamples);
  const drawn = new Array<{ sum: number; count: number }>(tasks.length);
  for (let b = 0; b < resamples; b++) {
    for (let i = 0; i < tasks.length; i++) drawn[i] = tasks[Math.floor(random() * tasks.length)]!;
    stats[b] = ratioOfSums(drawn);
  }
  stats.sort();
  // Symmetric ranks, so swapping the two policies mirrors the interval exactly.
  const low = Math.floor(((1 - confidence) / 2) * (resamples - 1));
  return { gain, lower: stats[low]!, upper: stats[resamples - 1 - low]! };
}

/** Tasks may hold different numbers of samples, so the mean is over pairs, not over task means. */
function ratioOfSums(groups: ReadonlyArray<{ sum: number; count: number }>): number {
  let sum = 0;
  let count = 0;
  for (const group of groups) {
    sum += group.sum;
    count += group.count;
  }
  return sum / count;
}
