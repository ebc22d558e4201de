import {
  isWhitespace,
  keyOf,
  literalBytes,
  literalComplete,
  newLiteral,
  newNumber,
  newString,
  numberComplete,
  stepLiteral,
  stepNumber,
  stepString,
  type LiteralState,
  type NumberState,
  type StringState,
} from './json-scalars.js';
import { ANY, ANY_OBJECT, type ObjectShape, type Shape } from './schema-shape.js';

/**
 * An incremental checker of JSON text against a shape, a byte at a time: a stack of frames, the
 * innermost last, never mutated (a step returns a new stack, so checking a candidate token costs
 * nothing to undo). A state is kept only while some completion of its text is a valid value of the
 * shape, so generation never walks into a dead end. The top-level value has no whitespace around
 * it (a tool call's arguments sit between the name and `</tool_call>`, the parser wants them tight).
 */
type ObjectPhase = 'open' | 'comma' | 'key' | 'colon' | 'value' | 'member' | 'after';
interface ObjectState {
  t: 'object';
  shape: ObjectShape;
  seen: readonly string[];
  phase: ObjectPhase;
  /** The shape of the member whose key was just read. */
  pending: Shape;
}
interface ArrayState {
  t: 'array';
  items: Shape;
  phase: 'open' | 'comma' | 'item' | 'after';
}
type Frame =
  { t: 'done' } | { t: 'expect'; shape: Shape } | ObjectState | ArrayState | StringState | NumberState | LiteralState;

export type JsonState = readonly Frame[];

/** The state before the first byte of a value of `shape`. */
export function jsonStart(shape: Shape): JsonState {
  return [{ t: 'done' }, { t: 'expect', shape }];
}

const WORDS = ['true', 'false', 'null'];

/** The frames of a value of `shape` that starts with byte b, or null if none starts so. */
function startValue(shape: Shape, b: number): Frame | null {
  switch (shape.kind) {
    case 'any':
      return (
        startValue(ANY_OBJECT, b) ??
        startValue({ kind: 'array', items: ANY }, b) ??
        startValue({ kind: 'string' }, b) ??
        startValue({ kind: 'number' }, b) ??
        newLiteral(WORDS, b)
      );
    case 'object':
      return b === 0x7b ? { t: 'object', shape, seen: [], phase: 'open', pending: ANY } : null;
    case 'array':
      return b === 0x5b ? { t: 'array', items: shape.items, phase: 'open' } : null;
    case 'string':
      return b === 0x22 ? newString(false) : null;
    case 'number':
    case 'integer':
      return newNumber(shape.kind === 'integer', b);
    case 'boolean':
      return newLiteral(['true', 'false'], b);
    case 'null':
      return newLiteral(['null'], b);
    case 'literal':
      return newLiteral(shape.texts.map(literalBytes), b);
    case 'union':
      for (const option of shape.options) {
        const frame = startValue(option, b);
        if (frame) return frame;
      }
      return null;
  }
}

const requiredMet = (o: ObjectState) => o.shape.required.every((name) => o.seen.includes(name));
const moreKeys = (o: ObjectState) =>
  o.shape.additional !== false || [...o.shape.properties.keys()].some((name) => !o.seen.includes(name));

/** Replaces the top frame. */
const swap = (stack: JsonState, frame: Frame): JsonState => [...stack.slice(0, -1), frame];

/** The stack once its top value has ended: the container around it moves past the value. */
function afterValue(stack: JsonState): JsonState {
  const below = stack.slice(0, -1);
  const parent = below.at(-1) as Frame;
  if (parent.t === 'object') return swap(below, { ...parent, phase: 'after' });
  if (parent.t === 'array') return swap(below, { ...parent, phase: 'after' });
  return below;
}

/** The stack once a key frame has ended with `key`; null if that key may not appear. */
function afterKey(stack: JsonState, key: string): JsonState | null {
  const below = stack.slice(0, -1);
  const parent = below.at(-1) as ObjectState;
  if (parent.seen.includes(key)) return null;
  const pending = parent.shape.properties.get(key) ?? parent.shape.additional;
  if (pending === false) return null;
  return swap(below, { ...parent, seen: [...parent.seen, key], phase: 'colon', pending });
}

function startKey(o: ObjectState): Frame {
  if (o.shape.additional !== false) return newString(true);
  const names = [...o.shape.properties.keys()].filter((name) => !o.seen.includes(name));
  return { t: 'literal', texts: names.map((name) => literalBytes(JSON.stringify(name))), at: 1, key: true };
}

function stepObject(stack: JsonState, o: ObjectState, b: number): JsonState | null {
  if (isWhitespace(b) && o.phase !== 'key' && o.phase !== 'member') return stack;
  const close = () => (requiredMet(o) ? afterValue(stack) : null);
  switch (o.phase) {
    case 'open':
      if (b === 0x7d) return close();
      return b === 0x22 && moreKeys(o) ? [...swap(stack, { ...o, phase: 'key' }), startKey(o)] : null;
    case 'comma':
      return b === 0x22 ? [...swap(stack, { ...o, phase: 'key' }), startKey(o)] : null;
    case 'colon':
      return b === 0x3a ? swap(stack, { ...o, phase: 'value' }) : null;
    case 'value': {
      const value = startValue(o.pending, b);
      return value && [...swap(stack, { ...o, phase: 'member' }), value];
    }
    case 'after':
      if (b === 0x7d) return close();
      return b === 0x2c && moreKeys(o) ? swap(stack, { ...o, phase: 'comma' }) : null;
    default:
      return null;
  }
}

function stepArray(stack: JsonState, a: ArrayState, b: number): JsonState | null {
  if (isWhitespace(b) && a.phase !== 'item') return stack;
  if (b === 0x5d && (a.phase === 'open' || a.phase === 'after')) return afterValue(stack);
  if (a.phase === 'after') return b === 0x2c ? swap(stack, { ...a, phase: 'comma' }) : null;
  if (a.phase === 'item') return null;
  const value = startValue(a.items, b);
  return value && [...swap(stack, { ...a, phase: 'item' }), value];
}

/** The state after one more byte, or null if no valid text continues so. */
export function stepJson(stack: JsonState, b: number): JsonState | null {
  const top = stack.at(-1) as Frame;
  switch (top.t) {
    case 'done':
      return null;
    case 'expect': {
      const value = startValue(top.shape, b);
      return value && swap(stack, value);
    }
    case 'object':
      return stepObject(stack, top, b);
    case 'array':
      return stepArray(stack, top, b);
    case 'string': {
      const next = stepString(top, b);
      if (next !== 'end') return next && next !== 'pass' ? swap(stack, next) : null;
      return top.raw === null ? afterValue(stack) : afterKey(stack, keyOf(top));
    }
    case 'number':
    case 'literal': {
      const next = top.t === 'number' ? stepNumber(top, b) : stepLiteral(top, b);
      if (next === null || next === 'end') return null;
      if (next !== 'pass') return swap(stack, next);
      const ended = endScalar(stack);
      return ended && stepJson(ended, b);
    }
  }
}

/** The stack once its complete number or literal on top is taken as ended; null if it is not complete. */
function endScalar(stack: JsonState): JsonState | null {
  const top = stack.at(-1) as Frame;
  if (top.t === 'number') return numberComplete(top) ? afterValue(stack) : null;
  if (top.t !== 'literal') return null;
  const text = literalComplete(top);
  if (text === undefined) return null;
  return top.key
    ? afterKey(stack, JSON.parse(Buffer.from(text, 'latin1').toString('utf8')) as string)
    : afterValue(stack);
}

/** Feeds bytes; null once one is refused. */
export function feedJson(stack: JsonState | null, bytes: Iterable<number>): JsonState | null {
  let state = stack;
  for (const b of bytes) {
    if (state === null) return null;
    state = stepJson(state, b);
  }
  return state;
}

/** Whether the text so far is a whole value: the reply may end here. */
export function jsonComplete(stack: JsonState): boolean {
  const top = stack.at(-1) as Frame;
  if (top.t === 'done') return true;
  const ended = top.t === 'number' || top.t === 'literal' ? endScalar(stack) : null;
  return ended !== null && ended.at(-1)?.t === 'done';
}
