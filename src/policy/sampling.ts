/**
 * Which tokens a row may draw next: only those of `allow`, or any but those of `ban`; null, any.
 * The log-prob reported is the masked distribution's (see sampleToken).
 */
export type TokenMask = { allow: ReadonlySet<number> } | { ban: ReadonlySet<number> } | null;

function permits(mask: TokenMask, id: number): boolean {
  if (mask === null) return true;
  return 'allow' in mask ? mask.allow.has(id) : !mask.ban.has(id);
}

/** log Σ exp(logits) over the tokens the mask permits: what turns a logit into a log-prob. */
function logNormalizer(logits: readonly number[], mask: TokenMask = null): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (permits(mask, i)) max = Math.max(max, logits[i] as number);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) if (permits(mask, i)) sum += Math.exp((logits[i] as number) - max);
  return max + Math.log(sum);
}

/**
 * Draws a token from logits with temperature and nucleus (top-p) sampling; temperature 0 is
 * greedy. The log-prob returned is the log-softmax of the raw logits over the tokens the mask
 * permits: the distribution the token was drawn from, renormalised after the mask (tool_choice,
 * constrained decoding), since the journal's log-probs are the behaviour policy of the trainer's
 * importance weights (a masked-out token had probability 0 of being drawn). Temperature and top-p
 * are not applied to it, as in vLLM's default raw log-probs: rollouts for training sample at
 * temperature 1 and top-p 1, where this is exactly the distribution drawn from.
 */
export function sampleToken(
  logits: readonly number[],
  temperature: number,
  topP: number,
  u: number,
  mask: TokenMask = null,
): { id: number; logprob: number } {
  const max = Math.max(...logits);
  const logZ = logNormalizer(logits, mask);
  const pick = (id: number) => ({ id, logprob: (logits[id] as number) - logZ });
  if (temperature <= 0) {
    let best = -1;
    for (let i = 0; i < logits.length; i++)
      if (permits(mask, i) && (best < 0 || (logits[i] as number) > (logits[best] as number))) best = i;
    return pick(Math.max(best, 0));
  }
  const weights = logits.map((l, id) => (permits(mask, id) ? Math.exp((l - max) / temperature) : 0));
  const total = weights.reduce((a, b) => a + b, 0);
  let order = weights.map((w, id) => ({ id, p: w / total })).filter((e) => mask === null || e.p > 0);
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

/**
 * The k most likely tokens of the distribution sampleToken reports (the mask's permitted tokens,
 * renormalised), most likely first; fewer than k where fewer are permitted.
 */
export function topLogprobs(
  logits: readonly number[],
  k: number,
  mask: TokenMask = null,
): Array<{ id: number; logprob: number }> {
  if (k <= 0) return [];
  const logZ = logNormalizer(logits, mask);
  return logits
    .map((l, id) => ({ id, logprob: l - logZ }))
    .filter((entry) => permits(mask, entry.id))
    .sort((a, b) => b.logprob - a.logprob || a.id - b.id)
    .slice(0, k);
}
