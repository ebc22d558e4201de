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
export function discordantPairs(before: Record<string, number>, after: Record<string, number>): { gained: string[]; lost: string[] } {
  const missing = Object.keys(before).filter((id) => !(id in after));
  if (missing.length > 0) throw new Error(`paired comparison: ${missing.length} task(s) have no outcome after, e.g. ${missing[0]}`);
  const ids = Object.keys(before);
  return {
    gained: ids.filter((id) => (before[id] ?? 0) <= 0 && (after[id] ?? 0) > 0),
    lost: ids.filter((id) => (before[id] ?? 0) > 0 && (after[id] ?? 0) <= 0),
  };
}
