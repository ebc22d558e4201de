/**
 * Draws a token from logits with temperature and nucleus (top-p) sampling; temperature 0 is
 * greedy. The log-prob returned is the model's own (log-softmax of the raw logits), as vLLM
 * reports by default and as the trainer computes it, so the first PPO ratio is exactly 1.
 */
export function sampleToken(
  logits: readonly number[],
  temperature: number,
  topP: number,
  u: number,
): { id: number; logprob: number } {
  const max = Math.max(...logits);
  const logZ = max + Math.log(logits.reduce((sum, l) => sum + Math.exp(l - max), 0));
  const pick = (id: number) => ({ id, logprob: (logits[id] as number) - logZ });
  if (temperature <= 0) {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if ((logits[i] as number) > (logits[best] as number)) best = i;
    return pick(best);
  }
  const weights = logits.map((l) => Math.exp((l - max) / temperature));
  const total = weights.reduce((a, b) => a + b, 0);
  let order = weights.map((w, id) => ({ id, p: w / total }));
  if (topP < 1) {
    order = order.sort((a, b) => b.p - a.p);
    let mass = 0;
    const kept = [];
    for (const entry of order) {
      kept.push(entry);
      mass += entry.p;
      if (mass >= topP) break;
    }
    order = kept.map((e) => ({ id: e.id, p: e.p / mass }));
  }
  let acc = 0;
  for (const { id, p } of order) {
    acc += p;
    if (u < acc) return pick(id);
  }
  return pick((order[order.length - 1] as { id: number }).id);
}
