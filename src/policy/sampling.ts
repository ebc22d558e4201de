/**
 * Which tokens a row may draw next: only those of `allow`, or any but those of `ban`; null, any.
 * A mask shapes the draw only: the log-prob reported stays the model's own (see sampleToken).
 */
export type TokenMask = { allow: ReadonlySet<number> } | { ban: ReadonlySet<number> } | null;

function permits(mask: TokenMask, id: number): boolean {
  if (mask === null) return true;
  return 'allow' in mask ? mask.allow.has(id) : !mask.ban.has(id);
}

/** log Σ exp(logits): what turns a logit into the model's log-prob. */
function logNormalizer(logits: readonly number[]): number {
  let max = -Infinity;
  for (const l of logits) max = Math.max(max, l);
  let sum = 0;
  for (const l of logits) sum += Math.exp(l - max);
  return max + Math.log(sum);
}

/**
 * Draws a token from logits with temperature and nucleus (top-p) sampling; temperature 0 is
 * greedy; a mask (tool_choice, constrained decoding) limits the draw to the tokens it permits.
 * The log-prob returned is the model's own (log-softmax of the raw logits, before the mask), as
 * vLLM reports by default (its raw log-probs are taken before its logits processors, guided
 * decoding among them) and as the trainer computes it: the first PPO ratio is exactly 1. A
 * masked distribution's log-prob would make every ratio of a constrained token < 1 against a
 * trainer that knows no mask, a bias the clip would then act on.
 */
export function sampleToken(
  logits: readonly number[],
  temperature: number,
  topP: number,
  u: number,
  mask: TokenMask = null,
): { id: number; logprob: number } {
  const max = Math.max(...logits);
  const logZ = logNormalizer(logits);
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

/** The k most likely tokens under the model's own log-probs (unmasked, as sampleToken reports), most likely first. */
export function topLogprobs(logits: readonly number[], k: number): Array<{ id: number; logprob: number }> {
  if (k <= 0) return [];
  const logZ = logNormalizer(logits);
  return logits
    .map((l, id) => ({ id, logprob: l - logZ }))
    .sort((a, b) => b.logprob - a.logprob || a.id - b.id)
    .slice(0, k);
}
