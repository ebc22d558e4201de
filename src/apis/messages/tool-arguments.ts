/**
 * A tool call's arguments between the two APIs: chat carries them as the JSON text the model
 * wrote (`arguments`), Messages as an object (`input`). The gateway merges consecutive calls only
 * when the next prompt, rendered from the Messages history the harness sends back, starts with the
 * previous prompt and completion token for token — and a chat template renders `arguments` as the
 * text it is. So `input` goes back to text exactly as it came from it:
 *
 * - fromChat parses the arguments with JSON.parse (key order kept, as JSON.parse keeps it);
 * - toChat writes `input` back in the translation's style: `compact` (JSON.stringify, no spaces:
 *   what the embedded policy's models write) or `python` (Python's `json.dumps(…,
 *   ensure_ascii=False)`, `", "` and `": "`: what vLLM's tool parsers, e.g. hermes, re-serialize
 *   arguments to).
 *
 * The round trip is exact when the chat arguments are written in the style, which the tests check.
 * It is not for text JSON.parse normalizes (spaces of another style, `1.0`, `\u00e9`, duplicate or
 * integer-like keys, which JavaScript orders first); such a call's next prompt differs from what
 * the model wrote, and the gateway sees the break. Arguments that are not a JSON object (a model
 * can write anything) are handed over wrapped, `{"rein_unparsed_arguments": "<the text>"}`, so the
 * harness sees what came instead of a crash, and toChat restores the text exactly.
 */
export type ToolArgumentsStyle = 'compact' | 'python';

/** The key wrapping arguments that are not a JSON object. */
export const UNPARSED_ARGUMENTS = 'rein_unparsed_arguments';

/** A chat tool call's arguments as a Messages `input` (an object). */
export function inputOfArguments(args: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(args);
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed))
      return parsed as Record<string, unknown>;
  } catch {
    // not JSON: wrapped below
  }
  return { [UNPARSED_ARGUMENTS]: args };
}

/** A Messages `input` written back as the chat arguments it came from (see the rule above). */
export function argumentsOfInput(input: unknown, style: ToolArgumentsStyle): string {
  if (input !== null && typeof input === 'object' && !Array.isArray(input)) {
    const keys = Object.keys(input);
    const raw = (input as Record<string, unknown>)[UNPARSED_ARGUMENTS];
    if (keys.length === 1 && typeof raw === 'string') return raw;
  }
  return style === 'compact' ? JSON.stringify(input ?? {}) : pythonJson(input ?? {});
}

/** Python's `json.dumps(value, ensure_ascii=False)`: JSON.stringify's escapes, `", "` and `": "`. */
function pythonJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => pythonJson(item ?? null)).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${pythonJson(v)}`).join(', ')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
