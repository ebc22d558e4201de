import { conversationMessages } from '../../tokenizer/content-parts.js';

type Json = Record<string, unknown>;

/**
 * When a turn the harness sent back is the same turn, as far as the model is concerned, as one it
 * sent or received before: same role, same text (content parts flattened as a text template sees
 * them, reasoning left out, surrounding space ignored), and the same tool calls by name and by the
 * JSON value of their arguments — frameworks re-serialise arguments (LangChain's spacing and key
 * order) and drop reasoning (templates that strip `<think>`), which changes no meaning. Ids are not
 * compared: a harness may renumber its tool calls.
 */
export function sameTurn(sent: Json, before: Json): boolean {
  if (sent.role !== before.role) return false;
  const text = textOf(sent);
  if (text === undefined || text !== textOf(before)) return false;
  return sameToolCalls(sent.tool_calls, before.tool_calls);
}

const THINKING = /<think>[\s\S]*?<\/think>/g;

/** A message's text as a string template sees it, reasoning blocks out; undefined for parts that are not text. */
function textOf(message: Json): string | undefined {
  try {
    const [flat] = conversationMessages([{ role: String(message.role), content: message.content }], 'string');
    return String(flat?.content ?? '')
      .replace(THINKING, '')
      .trim();
  } catch {
    return undefined;
  }
}

function sameToolCalls(a: unknown, b: unknown): boolean {
  const left = Array.isArray(a) ? a : [];
  const right = Array.isArray(b) ? b : [];
  if (left.length !== right.length) return false;
  return left.every((call, i) => {
    const x = functionOf(call);
    const y = functionOf(right[i]);
    return x !== undefined && y !== undefined && x.name === y.name && sameArguments(x.arguments, y.arguments);
  });
}

function functionOf(call: unknown): { name: unknown; arguments: unknown } | undefined {
  if (call === null || typeof call !== 'object') return undefined;
  const fn = (call as Json).function;
  if (fn === null || typeof fn !== 'object') return undefined;
  return { name: (fn as Json).name, arguments: (fn as Json).arguments };
}

/** Equal JSON values (key order free), or equal strings where either is not JSON. */
function sameArguments(a: unknown, b: unknown): boolean {
  const x = parsed(a);
  const y = parsed(b);
  if (x === undefined || y === undefined) return a === b;
  return canonical(x) === canonical(y);
}

function parsed(value: unknown): unknown {
  if (typeof value !== 'string') return value ?? undefined;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    return undefined;
  }
}

/** JSON with object keys sorted: one text per value. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Json).sort(([p], [q]) => (p < q ? -1 : p > q ? 1 : 0)))
      : v,
  );
}
