/**
 * Prometheus's text exposition format, read the way a scraper reads it (prom-client cannot parse
 * it back): one sample a line, `name{label="value",...} number`, comments and blank lines skipped.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, raw] of (m[2] ?? '').matchAll(LABEL))
      labels[key as string] = (raw as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({
      name: m[1] as string,
      labels,
      value: m[3] === '+Inf' ? Infinity : m[3] === '-Inf' ? -Infinity : Number(m[3]),
    });
  }
  return samples;
}

/** The value of the one sample with this name whose labels include these; undefined when there is none. */
export function valueOf(
  samples: readonly Sample[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1)
    throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}; name more labels`);
  return found[0]?.value;
}

/** The names of the metric families a scrape declares (its # TYPE lines). */
export function familiesOf(text: string): Map<string, string> {
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1] as string, m[2] as string]));
}

/** GET /metrics as Prometheus does, with a bearer token when one is given. */
export async function scrape(
  url: string,
  token?: string,
): Promise<{ status: number; contentType: string; text: string; samples: Sample[] }> {
  const res = await fetch(url, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } });
  const text = await res.text();
  return {
    status: res.status,
    contentType: res.headers.get('content-type') ?? '',
    text,
    samples: res.ok ? parseExposition(text) : [],
  };
}
