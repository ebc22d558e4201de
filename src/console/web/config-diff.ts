/** Configs side by side: each flattened to its leaves by path, and the paths where they differ (no DOM here). */

/** A path segment: `.name` for a plain key, `["a.b"]` for any other, `[3]` for an array index; never ambiguous. */
const segment = (key: string | number) =>
  typeof key === 'number' ? `[${key}]` : /^[A-Za-z_$][\w$-]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;

/**
 * A JSON value's leaves by path (`.samples.estimator` → `"grpo"`), each as JSON text; an empty object or array is a
 * leaf of its own (`{}`, `[]`), so two values have the same leaves exactly when they are equal.
 */
export function leaves(value: unknown, path = ''): Map<string, string> {
  const found = new Map<string, string>();
  const walk = (v: unknown, at: string) => {
    const entries: Array<[string | number, unknown]> = Array.isArray(v)
      ? v.map((item, i) => [i, item])
      : v !== null && typeof v === 'object'
        ? Object.entries(v)
        : [];
    if (entries.length === 0) {
      found.set(at, JSON.stringify(v) ?? 'null');
      return;
    }
    for (const [key, item] of entries) walk(item, `${at}${segment(key)}`);
  };
  walk(value, path);
  return found;
}

/** One setting that differs: its path and each config's value (null: the config does not have it). */
export interface ConfigDifference {
  path: string;
  values: Array<string | null>;
}

/** The settings where the configs differ (one absent from some counts), in path order, and how many agree. */
export function configDiff(configs: readonly unknown[]): { differences: ConfigDifference[]; same: number } {
  const flat = configs.map((c) => leaves(c));
  const paths = [...new Set(flat.flatMap((f) => [...f.keys()]))].sort();
  const differences: ConfigDifference[] = [];
  for (const path of paths) {
    const values = flat.map((f) => f.get(path) ?? null);
    if (values.some((v) => v !== values[0])) differences.push({ path, values });
  }
  return { differences, same: paths.length - differences.length };
}
