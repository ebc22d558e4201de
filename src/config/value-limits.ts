/** Deeper than this a config is not hand-written; the settings themselves nest a few levels. */
export const MAX_CONFIG_DEPTH = 64;

/**
 * What no setting may hold, found before anything recursive (validation, cloning, printing)
 * touches the value: nesting past `maxDepth`, a `__proto__` key, NUL bytes (a path with one names another file, or
 * none) and text that is not valid Unicode (lone surrogates, e.g. from a JSON "\ud800").
 * Iterative, so a hostile depth cannot overflow the stack here either.
 */
export function valueProblems(value: unknown, maxDepth = MAX_CONFIG_DEPTH): string[] {
  const problems: string[] = [];
  const pending: Array<{ value: unknown; path: string[] }> = [{ value, path: [] }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const at = next.path.length > 0 ? next.path.join('.') : '(top level)';
    if (typeof next.value === 'string') {
      const problem = textProblem(next.value);
      if (problem) problems.push(`${at}: ${problem}`);
      continue;
    }
    if (next.value === null || typeof next.value !== 'object') continue;
    if (next.path.length >= maxDepth) {
      problems.push(`${at}: nested more than ${maxDepth} levels deep; a config's settings nest a few levels at most`);
      continue;
    }
    for (const [key, child] of Object.entries(next.value)) {
      // No setting is called so, and as a name in a map it would reach objects' prototypes.
      const problem = key === '__proto__' ? 'is "__proto__", which no setting or name may be' : textProblem(key);
      if (problem) problems.push(`${[...next.path, JSON.stringify(key)].join('.')}: the key ${problem}`);
      pending.push({ value: child, path: [...next.path, key] });
    }
  }
  return problems.sort();
}

function textProblem(text: string): string | undefined {
  if (text.includes('\0')) return 'contains a NUL byte; remove it (no path or name can hold one)';
  // With the u flag only an unpaired surrogate is a code point of category Cs.
  if (/\p{Cs}/u.test(text))
    return 'is not valid Unicode (it holds a lone surrogate, e.g. from "\\ud800" in JSON); write the characters themselves';
  return undefined;
}
