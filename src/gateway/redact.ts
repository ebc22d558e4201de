/**
 * Redaction runs on everything before it is journaled: request bodies (as received and as sent)
 * and responses. Secrets a harness puts in prompts (API keys, bearer tokens, its own rollout
 * key) never reach the trace store.
 */
export interface RedactionRule {
  name: string;
  pattern: RegExp;
}

export const DEFAULT_REDACTION_RULES: RedactionRule[] = [
  { name: 'bearer-token', pattern: /\bBearer\s+[A-Za-z0-9._~+/=-]{8,}/g },
  { name: 'openai-key', pattern: /\bsk-[A-Za-z0-9_-]{16,}/g },
  // Not `\b` at the end: a base64url MAC may end in '-' or '_', where no word boundary exists.
  { name: 'rollout-key', pattern: /\brk-[A-Za-z0-9_-]+\.\d+\.[A-Za-z0-9_-]{32}(?![A-Za-z0-9_-])/g },
  { name: 'verifier-key', pattern: /\bvk-[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{32}(?![A-Za-z0-9_-])/g },
  { name: 'aws-access-key', pattern: /\bAKIA[0-9A-Z]{16}\b/g },
  { name: 'github-token', pattern: /\bgh[pousr]_[A-Za-z0-9]{30,}\b/g },
  { name: 'private-key', pattern: /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g },
];

/** Builds rules from config: `{ name, regex }` pairs, always global. */
export function redactionRules(custom: Array<{ name: string; regex: string }>, includeDefaults = true): RedactionRule[] {
  const rules = custom.map(({ name, regex }) => {
    try {
      return { name, pattern: new RegExp(regex, 'g') };
    } catch (err) {
      throw new Error(`gateway.redact: rule "${name}" has an invalid regex ${JSON.stringify(regex)}: ${(err as Error).message}`);
    }
  });
  return includeDefaults ? [...DEFAULT_REDACTION_RULES, ...rules] : rules;
}

/** A deep copy of `value` with every match of every rule in every string replaced. */
export function redact<T>(value: T, rules: readonly RedactionRule[]): T {
  if (rules.length === 0) return value;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return redactText(v, rules);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, inner] of Object.entries(v)) out[k] = walk(inner);
      return out;
    }
    return v;
  };
  return walk(value) as T;
}

export function redactText(text: string, rules: readonly RedactionRule[]): string {
  let out = text;
  for (const rule of rules) {
    rule.pattern.lastIndex = 0;
    out = out.replace(rule.pattern, `[REDACTED:${rule.name}]`);
  }
  return out;
}
