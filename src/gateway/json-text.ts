/**
 * JSON as text: where the members of an object and the elements of an array lie in it, so the
 * gateway can add, replace or remove a few values and leave every other byte as it was sent
 * (a parse and re-serialisation would turn `1.0` into `1` and 2^53 + 1 into 2^53). The text is
 * always valid JSON already (JSON.parse accepted it), so the scanner only has to skip, not check.
 */

/**
 * The deepest nesting the gateway accepts: deeper than any real request, shallow enough that no recursive walk
 * overflows.
 */
export const MAX_JSON_DEPTH = 512;

export interface Member {
  key: string;
  /** Where the key's opening quote is. */
  start: number;
  valueStart: number;
  /** One past the value's last character. */
  valueEnd: number;
}

export interface Span {
  start: number;
  end: number;
}

export interface Edit {
  start: number;
  end: number;
  text: string;
}

/** Whether the text nests arrays and objects deeper than `max` (strings are skipped, not counted). */
export function nestedDeeperThan(text: string, max: number): boolean {
  // Each level opens with a character of its own: a text with no more than `max` of them cannot
  // nest deeper (a stream's chunks, most requests). Counting them is native indexOf, not a walk.
  if (text.length <= max || openersAtMost(text, max)) return false;
  let depth = 0;
  const scan = new StructuralScan(text);
  for (let at = scan.at(0); at >= 0;) {
    const c = text.charCodeAt(at);
    if (c === QUOTE) {
      at = scan.at(stringEnd(text, at));
      continue;
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else depth--;
    at = scan.at(at + 1);
  }
  return false;
}

function openersAtMost(text: string, max: number): boolean {
  let count = 0;
  for (const opener of ['{', '[']) {
    for (let at = text.indexOf(opener); at >= 0; at = text.indexOf(opener, at + 1)) if (++count > max) return false;
  }
  return true;
}

/**
 * The members of the object that starts at `at` (its `{`), in order, and where it ends. Pass the
 * same `scan` to every call on one text, so that no part of it is searched twice. `enter` may walk
 * a member's value itself (one pass over the text instead of one to skip it and one to go back
 * into it) and return where the value ends; undefined: skip it here.
 */
export function membersOf(
  text: string,
  at: number,
  scan = new StructuralScan(text),
  enter?: (key: string, valueStart: number) => number | undefined,
): { members: Member[]; end: number } {
  const members: Member[] = [];
  let i = skipSpace(text, at + 1);
  if (text.charCodeAt(i) === CLOSE_BRACE) return { members, end: i + 1 };
  for (;;) {
    const start = i;
    const keyEnd = stringEnd(text, i);
    // Only a key with an escape needs decoding: the others are their own text, without a parse per key.
    const raw = text.slice(start + 1, keyEnd - 1);
    const key = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
    const valueStart = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const valueEnd = enter?.(key, valueStart) ?? valueEndOf(text, valueStart, scan);
    members.push({ key, start, valueStart, valueEnd });
    i = skipSpace(text, valueEnd);
    if (text.charCodeAt(i) === CLOSE_BRACE) return { members, end: i + 1 };
    i = skipSpace(text, i + 1);
  }
}

/**
 * The elements of the array that starts at `at` (its `[`); `scan` and `enter` as for membersOf.
 * The array ends one past the first `]` after the last element's end.
 */
export function elementsOf(
  text: string,
  at: number,
  scan = new StructuralScan(text),
  enter?: (valueStart: number) => number | undefined,
): Span[] {
  const elements: Span[] = [];
  let i = skipSpace(text, at + 1);
  if (text.charCodeAt(i) === CLOSE_BRACKET) return elements;
  for (;;) {
    const end = enter?.(i) ?? valueEndOf(text, i, scan);
    elements.push({ start: i, end });
    i = skipSpace(text, end);
    if (text.charCodeAt(i) === CLOSE_BRACKET) return elements;
    i = skipSpace(text, i + 1);
  }
}

/** The edits that remove the members `remove` picks, commas included, so the rest stays valid JSON. */
export function removals(members: readonly Member[], remove: (member: Member) => boolean): Edit[] {
  const gone = members.map(remove);
  const lastKept = gone.lastIndexOf(false);
  const last = members.at(-1);
  if (!last) return [];
  if (lastKept < 0) return [{ start: (members[0] as Member).start, end: last.valueEnd, text: '' }];
  const edits: Edit[] = [];
  // A member before the last kept one goes with the comma after it; those after it, with the comma before them.
  members.forEach((member, i) => {
    if (gone[i] && i < lastKept) edits.push({ start: member.start, end: (members[i + 1] as Member).start, text: '' });
  });
  if (lastKept < members.length - 1)
    edits.push({ start: (members[lastKept] as Member).valueEnd, end: last.valueEnd, text: '' });
  return edits;
}

/** The edit that adds `"key": value` (value already JSON) at the end of an object. */
export function addition(object: { members: readonly Member[]; end: number }, key: string, value: string): Edit {
  const at = object.members.at(-1)?.valueEnd ?? object.end - 1;
  const member = `${JSON.stringify(key)}:${value}`;
  return { start: at, end: at, text: object.members.length > 0 ? `,${member}` : member };
}

/** The text with the edits made (they must not overlap). */
export function applyEdits(text: string, edits: readonly Edit[]): string {
  if (edits.length === 0) return text;
  const sorted = [...edits].sort((a, b) => a.start - b.start);
  let out = '';
  let at = 0;
  for (const edit of sorted) {
    out += text.slice(at, edit.start) + edit.text;
    at = edit.end;
  }
  return out + text.slice(at);
}

/** Where the first non-whitespace character at or after `i` is. */
export function skipSpace(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i;
    i++;
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
/** The characters that open or close a string, an object or an array. */
const STRUCTURAL = ['"', '{', '}', '[', ']'] as const;

/** How far a structural scan looks character by character before it searches. */
const NEAR = 32;

/**
 * Finds the first quote, brace or bracket at or after a position in one text. Each character is
 * looked for with indexOf, which skips the digits of a long token-id array many times faster than
 * a loop over characters or a regex, and its next position is kept until a walk passes it. A walk
 * that goes back into a value it skipped searches only up to where it had been, so no part of the
 * text is searched more than a few times: hostile nesting stays linear.
 */
export class StructuralScan {
  // Per character: `next` is its first position at or after `searchedFrom` (Infinity: none).
  private readonly next = [-1, -1, -1, -1, -1];
  private readonly searchedFrom = [0, 0, 0, 0, 0];

  constructor(private readonly text: string) {}

  /** The position of the first quote, brace or bracket at or after `from`, or -1. */
  at(from: number): number {
    const text = this.text;
    // Most JSON is dense with quotes and brackets: a short look character by character finds the
    // next one sooner than five searches would; only a long run without any (digits) goes to them.
    const near = Math.min(text.length, from + NEAR);
    for (let at = from; at < near; at++) {
      const c = text.charCodeAt(at);
      if (c === QUOTE || c === OPEN_BRACE || c === CLOSE_BRACE || c === OPEN_BRACKET || c === CLOSE_BRACKET) return at;
    }
    if (near === text.length) return -1;
    let first = Infinity;
    for (let k = 0; k < STRUCTURAL.length; k++) {
      const at = this.firstFrom(k, from);
      if (at < first) first = at;
    }
    return first === Infinity ? -1 : first;
  }

  private firstFrom(k: number, from: number): number {
    const known = this.next[k] as number;
    const base = this.searchedFrom[k] as number;
    let at: number;
    if (from >= base) {
      if (known >= from) return known;
      at = this.text.indexOf(STRUCTURAL[k] as string, from);
      at = at < 0 ? Infinity : at;
    } else {
      // Back before where it looked: only [from, base) is unknown (a slice shares the text's memory).
      const local = this.text.slice(from, base).indexOf(STRUCTURAL[k] as string);
      at = local < 0 ? known : from + local;
    }
    this.next[k] = at;
    this.searchedFrom[k] = from;
    return at;
  }
}

/** One past the closing quote of the string whose opening quote is at `i`. */
function stringEnd(text: string, i: number): number {
  for (let at = i + 1; ;) {
    const quote = text.indexOf('"', at);
    if (quote < 0) return text.length;
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
    // An odd run of backslashes escapes the quote.
    if (backslashes % 2 === 0) return quote + 1;
    at = quote + 1;
  }
}

/** One past the last character of the value that starts at `i`. */
function valueEndOf(text: string, i: number, scan: StructuralScan): number {
  const c = text.charCodeAt(i);
  if (c === QUOTE) return stringEnd(text, i);
  if (c === OPEN_BRACE || c === OPEN_BRACKET) {
    let depth = 0;
    for (let at = scan.at(i); at >= 0;) {
      const d = text.charCodeAt(at);
      if (d === QUOTE) {
        at = scan.at(stringEnd(text, at));
        continue;
      }
      if (d === OPEN_BRACE || d === OPEN_BRACKET) depth++;
      else if (--depth === 0) return at + 1;
      at = scan.at(at + 1);
    }
    return text.length;
  }
  // A number, true, false or null: runs to the next delimiter.
  let at = i;
  for (; at < text.length; at++) {
    const d = text.charCodeAt(at);
    if (d === 0x2c || d === CLOSE_BRACE || d === CLOSE_BRACKET || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09)
      break;
  }
  return at;
}
