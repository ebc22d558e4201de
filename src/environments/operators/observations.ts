import type { ObservationsSpec } from '../variant-spec.js';

/**
 * The `observations` operator: the same tool output, read differently (another format, another
 * order, distractor lines around it, other words), so a harness that only works on one exact
 * wording shows it. The content is never changed: every fact in the output is still there.
 * Deterministic for a `random` (a session's seeded PRNG), so a replay reads the same text.
 */

/** The observation reshaped by format, then reorder, then noise, then template. */
export function reshapeObservation(
  spec: ObservationsSpec | undefined,
  observation: string,
  random: () => number,
): string {
  if (!spec) return observation;
  let text = observation;
  if (spec.format === 'json') text = asJson(text);
  if (spec.format === 'lines') text = asLines(text);
  if (spec.reorder) text = reordered(text, random);
  if (spec.noise) text = [...distractorLines(spec.noise.lines, random), text].join('\n');
  // split/join rather than replace(): a `$&` or `$1` in the output must stay as it is.
  if (spec.template) text = spec.template.split('{observation}').join(text);
  return text;
}

/** The text as JSON, or undefined when it is not JSON. */
function parsedJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * format 'json': structured output (a JSON object or array) stays; anything else, a bare number
 * or a sentence, is wrapped as {"result": <the text>} so the caller always reads an object.
 */
function asJson(text: string): string {
  const parsed = parsedJson(text);
  if (parsed && typeof parsed.value === 'object' && parsed.value !== null) return text;
  return JSON.stringify({ result: text });
}

/** format 'lines': a non-empty JSON object as `key: value` lines (strings as they are); else unchanged. */
function asLines(text: string): string {
  const parsed = parsedJson(text);
  if (!parsed || !isObject(parsed.value) || Object.keys(parsed.value).length === 0) return text;
  return Object.entries(parsed.value)
    .map(([key, value]) => `${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join('\n');
}

/**
 * reorder: a JSON object's keys and an array's items in a seeded order, at every depth. Output
 * that is not JSON, or whose numbers would not survive a re-serialisation (integers past 2^53,
 * 1e400), stays as it is: another order must not mean other values. Indented JSON stays indented.
 */
function reordered(text: string, random: () => number): string {
  const parsed = parsedJson(text);
  if (!parsed || typeof parsed.value !== 'object' || parsed.value === null || !numbersSurvive(text)) return text;
  return JSON.stringify(shuffledDeep(parsed.value, random), null, text.includes('\n') ? 2 : undefined);
}

function shuffledDeep(value: unknown, random: () => number): unknown {
  if (Array.isArray(value))
    return shuffled(
      value.map((item) => shuffledDeep(item, random)),
      random,
    );
  if (!isObject(value)) return value;
  // fromEntries defines own properties, so a "__proto__" key stays a key.
  return Object.fromEntries(shuffled(Object.entries(value), random).map(([k, v]) => [k, shuffledDeep(v, random)]));
}

/** A copy in a seeded order (Fisher–Yates). */
function shuffled<T>(items: T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** Whether every number in the JSON text is finite and, if a whole number, exact as a double. */
function numbersSurvive(text: string): boolean {
  for (const [token] of text.matchAll(/"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g)) {
    if (token.startsWith('"')) continue;
    const value = Number(token);
    if (!Number.isFinite(value) || (/^-?\d+$/.test(token) && !Number.isSafeInteger(value))) return false;
  }
  return true;
}

/** Lines a service might log next to its answer, that say nothing about the task. */
const DISTRACTORS: ((n: number, hex: string) => string)[] = [
  (n) => `note: cache warm (${n % 20} ms)`,
  (_n, hex) => `info: request id ${hex}`,
  (n) => `note: served by replica ${n % 7}`,
  (n) => `debug: connection pool ${n % 16}/16 idle`,
  (_n, hex) => `trace: span ${hex} closed`,
  (n) => `info: retries 0, latency ${n % 90} ms`,
  (n) => `note: build ${1000 + (n % 9000)} up to date`,
];

function distractorLines(count: number, random: () => number): string[] {
  return Array.from({ length: count }, () => {
    const pick = DISTRACTORS[Math.floor(random() * DISTRACTORS.length)] as (typeof DISTRACTORS)[number];
    const n = Math.floor(random() * 1_000_000);
    const hex = Math.floor(random() * 0x1_0000_0000)
      .toString(16)
      .padStart(8, '0');
    return pick(n, hex);
  });
}
