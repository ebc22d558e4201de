import { RE2JS } from 're2js';
import type { JsonObject } from './openai-types.js';

/**
 * Redaction runs on everything before it is journaled: request bodies (as received and as sent),
 * responses, and what the control API records (rollout metadata, status reasons and evidence,
 * events). Secrets a harness puts in prompts or logs (API keys, bearer tokens, its own rollout
 * key) never reach the trace store.
 *
 * Every rule runs on RE2 (re2js): time linear in the text, whatever the pattern and the text. A
 * backtracking engine let a chat of "rk-rk-rk-…" stall the gateway for minutes; RE2 has no
 * backreferences or lookaround, which is what makes that guarantee possible.
 */
export interface RedactionRule {
  name: string;
  /** The rule's source (what config gave), for a process that compiles the rules again. */
  regex: string;
  pattern: RE2JS;
}

const RE2_SYNTAX =
  'rules use RE2 syntax, which runs in linear time: no backreferences or lookaround; flags inline, as (?i)';

function rule(name: string, regex: string): RedactionRule {
  try {
    return { name, regex, pattern: RE2JS.compile(regex) };
  } catch (err) {
    throw new Error(
      `gateway.redact: rule "${name}" has an invalid regex ${JSON.stringify(regex)}: ${(err as Error).message} (${RE2_SYNTAX})`,
    );
  }
}

/** Why a rule's regex cannot be used (for config validation); undefined when it can. */
export function redactionRegexProblem(regex: string): string | undefined {
  try {
    RE2JS.compile(regex);
    return undefined;
  } catch (err) {
    return `${(err as Error).message}; ${RE2_SYNTAX}`;
  }
}

// Key rules end in an open-ended run rather than a lookahead (which RE2 lacks): a key's MAC is
// 32 characters, and a longer look-alike is better redacted too.
export const DEFAULT_REDACTION_RULES: RedactionRule[] = [
  rule('bearer-token', String.raw`\bBearer\s+[A-Za-z0-9._~+/=-]{8,}`),
  rule('openai-key', String.raw`\bsk-[A-Za-z0-9_-]{16,}`),
  rule('rollout-key', String.raw`\brk-[A-Za-z0-9_-]+\.\d+\.[A-Za-z0-9_-]{32,}`),
  rule('verifier-key', String.raw`\bvk-[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{32,}`),
  rule('aws-access-key', String.raw`\bAKIA[0-9A-Z]{16}\b`),
  rule('github-token', String.raw`\bgh[pousr]_[A-Za-z0-9]{30,}\b`),
  rule('private-key', String.raw`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`),
];

/** Rules as their sources, for another process to compile (see redactionRules). */
export const ruleSources = (rules: readonly RedactionRule[]) => rules.map(({ name, regex }) => ({ name, regex }));

/**
 * Builds rules from config: `{ name, regex }` pairs in RE2 syntax (flags inline, as `(?i)`). A
 * regex RE2 cannot run (a backreference, a lookaround) is refused here, at load, naming the rule.
 */
export function redactionRules(
  custom: Array<{ name: string; regex: string }>,
  includeDefaults = true,
): RedactionRule[] {
  const rules = custom.map(({ name, regex }) => rule(name, regex));
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
    // Keys too: a secret used as a key (a reward component, a span's input) is as secret as a value.
    let changed = false;
    const entries = Object.keys(v).map((k) => {
      const inner = (v as JsonObject)[k];
      const value = redacted(inner, rules);
      const key = redactText(k, rules);
      if (key !== k || value !== inner) changed = true;
      return [key, value] as const;
    });
    return changed ? objectOf(entries) : v;
  }
  return v;
}

/** The entries as an object, in order; a key two redacted keys share gets ` (2)`, ` (3)`... so none is lost. */
function objectOf(entries: ReadonlyArray<readonly [string, unknown]>): JsonObject {
  const out: JsonObject = {};
  for (const [k, value] of entries) {
    let key = k;
    for (let n = 2; Object.hasOwn(out, key); n++) key = `${k} (${n})`;
    // As a data property, so that even a key named __proto__ stays a plain key.
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** What every redacted span becomes, followed by its rule's name and `]`. */
export const REDACTION_MARK = '[REDACTED:';

export function redactText(text: string, rules: readonly RedactionRule[]): string {
  let out = text;
  for (const { name, pattern } of rules) {
    // test() alone runs on RE2's DFA: the common case, nothing to redact, costs one fast pass.
    if (pattern.test(out)) out = pattern.matcher(out).replaceAll(() => `${REDACTION_MARK}${name}]`);
  }
  return out;
}
