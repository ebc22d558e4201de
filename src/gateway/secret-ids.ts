import type { CallFinish } from '../store/trace-store.js';
import type { JsonObject } from './openai-types.js';
import { redact, type RedactionRule } from './redact.js';

/**
 * A call's outcome as the journal keeps it: the response redacted, and no token ids or per-token
 * text that spell what was redacted. The gateway has no tokenizer, so it cannot tell which ids
 * spell a secret: a request with anything redacted loses its prompt ids (the sample builder
 * re-renders the redacted prompt with the policy's tokenizer) and its prompt log-probs, and a
 * choice whose text had anything redacted loses its completion ids and log-probs, in the token
 * columns and in the journaled response, whose token strings and bytes spell a secret piece by
 * piece where no rule matches any one piece (the call is then not trained on: training the
 * policy to write "[REDACTED:…]" would be as wrong as training it to write the secret).
 *
 * @param requestRedacted whether redaction changed anything in the request as journaled
 */
export function withoutSecretIds<T extends Partial<Pick<CallFinish, 'response' | 'promptIds' | 'choices'>>>(
  result: T,
  requestRedacted: boolean,
  rules: readonly RedactionRule[],
): T {
  const out: T = { ...result };
  if (requestRedacted && out.promptIds) out.promptIds = null;
  if (result.response === undefined) return out;
  const response = result.response;
  let redacted = redact(response, rules) as JsonObject;
  if (requestRedacted && isObject(redacted) && redacted.prompt_logprobs != null)
    redacted = { ...redacted, prompt_logprobs: null };
  out.response = redacted;
  if (redacted === response) return out;
  const changed = changedChoices(response, redacted);
  const hit = (position: number | undefined) => changed === 'all' || position === undefined || changed.has(position);
  if (Array.isArray(redacted.choices)) {
    redacted.choices = (redacted.choices as unknown[]).map((choice, position) =>
      hit(position) && isObject(choice) && choice.logprobs != null ? { ...choice, logprobs: null } : choice,
    );
  }
  if (!out.choices?.length) return out;
  // Choices' tokens are in the order of their index (see extractTokens).
  const byIndex = (isObject(response) && Array.isArray(response.choices) ? (response.choices as unknown[]) : []).map(
    (choice, position) => ({ position, index: indexOf(choice, position) }),
  );
  byIndex.sort((a, b) => a.index - b.index);
  out.choices = out.choices.map((choice, order) =>
    hit(byIndex[order]?.position) ? { ...choice, completionIds: null, logprobs: null } : choice,
  );
  return out;
}

/**
 * Positions, in the response's choices array, of the choices redaction changed; 'all' when it
 * changed anything else (a secret where no choice's tokens account for it).
 */
function changedChoices(response: unknown, redacted: JsonObject): Set<number> | 'all' {
  if (!isObject(response) || !Array.isArray(response.choices) || !Array.isArray(redacted.choices)) return 'all';
  for (const key of Object.keys(redacted))
    if (key !== 'choices' && key !== 'prompt_logprobs' && redacted[key] !== response[key]) return 'all';
  const changed = new Set<number>();
  (redacted.choices as unknown[]).forEach((choice, position) => {
    if (choice !== (response.choices as unknown[])[position]) changed.add(position);
  });
  return changed;
}

function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function indexOf(choice: unknown, position: number): number {
  const index = (choice as JsonObject | null)?.index;
  return typeof index === 'number' ? index : position;
}
