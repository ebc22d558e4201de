import type { CallFinish } from '../store/trace-store.js';
import { redact, type RedactionRule } from './redact.js';

type Json = Record<string, unknown>;

/**
 * A call's outcome as the journal keeps it: the response redacted, and no token ids that decode
 * to what was redacted. The gateway has no tokenizer, so it cannot tell which ids spell a secret:
 * a request with anything redacted loses its prompt ids (the sample builder re-renders the
 * redacted prompt with the policy's tokenizer), and a choice whose text had anything redacted
 * loses its completion ids and log-probs (the call is then not trained on: training the policy to
 * write "[REDACTED:…]" would be as wrong as training it to write the secret).
 *
 * @param requestRedacted whether redaction changed anything in the request as journaled
 */
export function withoutSecretIds<T extends Partial<CallFinish>>(result: T, requestRedacted: boolean, rules: readonly RedactionRule[]): T {
  const out: T = { ...result };
  if (requestRedacted && out.promptIds) out.promptIds = null;
  if (result.response === undefined) return out;
  const response = result.response;
  const redacted = redact(response, rules);
  out.response = redacted;
  if (redacted === response || !out.choices?.length) return out;
  const changed = changedChoices(response, redacted);
  // Choices' tokens are in the order of their index (see extractTokens).
  out.choices = out.choices.map((choice, position) =>
    changed === 'all' || changed.has(position) ? { ...choice, completionIds: null, logprobs: null } : choice,
  );
  return out;
}

/** Positions, in index order, of the choices redaction changed; 'all' when it changed anything else. */
function changedChoices(response: unknown, redacted: unknown): Set<number> | 'all' {
  const before = response as Json;
  const after = redacted as Json;
  if (!Array.isArray(before.choices) || !Array.isArray(after.choices)) return 'all';
  // Anything but the choices changed (a secret where no choice's tokens account for it): withhold every choice.
  for (const key of Object.keys(after)) if (key !== 'choices' && after[key] !== before[key]) return 'all';
  const byIndex = before.choices.map((choice: unknown, position) => ({ choice, position, index: indexOf(choice, position) }));
  byIndex.sort((a, b) => a.index - b.index);
  const changed = new Set<number>();
  byIndex.forEach(({ choice, position }, order) => {
    if ((after.choices as unknown[])[position] !== choice) changed.add(order);
  });
  return changed;
}

function indexOf(choice: unknown, position: number): number {
  const index = (choice as Json | null)?.index;
  return typeof index === 'number' ? index : position;
}
