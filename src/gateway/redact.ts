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

/**
 * `value` with every match of every rule in every string replaced. Copy on write: what had
 * nothing to replace is shared with `value` (the very same value when nothing matched anywhere),
 * and `value` itself is never changed.
 */
export function redact<T>(value: T, rules: readonly RedactionRule[]): T {
  return rules.length === 0 ? value : (redacted(value, rules) as T);
}

function redacted(v: unknown, rules: readonly RedactionRule[]): unknown {
  if (typeof v === 'string') return redactText(v, rules);
  if (Array.isArray(v)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < v.length; i++) {
      const inner: unknown = v[i];
      const replaced = redacted(inner, rules);
      if (replaced !== inner) (out ??= v.slice())[i] = replaced;
    }
    return out ?? v;
  }
  if (v !== null && typeof v === 'object') {
    let out: Record<string, unknown> | undefined;
    for (const k in v) {
      if (!Object.hasOwn(v, k)) continue;
      const inner = (v as Record<string, unknown>)[k];
      const replaced = redacted(inner, rules);
      // As a data property, so that even a key named __proto__ stays a plain key.
      if (replaced !== inner) Object.defineProperty((out ??= { ...v }), k, { value: replaced, enumerable: true, writable: true, configurable: true });
    }
    return out ?? v;
  }
  return v;
}

export function redactText(text: string, rules: readonly RedactionRule[]): string {
  let out = text;
  for (const rule of rules) {
    rule.pattern.lastIndex = 0;
    out = out.replace(rule.pattern, `[REDACTED:${rule.name}]`);
  }
  return out;
}
