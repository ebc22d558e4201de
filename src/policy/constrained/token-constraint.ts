import type { ChatTokenizer } from '../../tokenizer/chat-tokenizer.js';
import { END_OF_TURN, SPECIAL_TOKENS, specialTokenId } from '../chat-format.js';
import { tokenBytes } from '../openai-replies.js';
import type { TokenMask } from '../sampling.js';
import { feedJson, jsonComplete, jsonStart, type JsonState } from './json-grammar.js';
import type { ObjectShape, Shape } from './schema-shape.js';

/**
 * Constrained decoding at the token level. A reply grammar is a small automaton over tokens:
 * byte tokens go through the JSON checker, special tokens (the tool-call brackets, the end of the
 * turn) are steps of their own. At every step the row may draw only tokens that keep its text a
 * valid prefix, and it may end (draw an end token) only where the text is whole.
 */
export type ReplyGrammar =
  { kind: 'json'; shape: Shape } | { kind: 'tool_calls'; tools: ReadonlyMap<string, ObjectShape>; parallel: boolean };

/** A token as the grammar reads it: its bytes, or a special token by id. */
type Piece = { bytes: Uint8Array } | { special: number };

const ENDS = new Set([specialTokenId(END_OF_TURN), specialTokenId('<|endoftext|>')]);
const CALL_START = specialTokenId('<tool_call>');
const CALL_END = specialTokenId('</tool_call>');

const piecesByTokenizer = new WeakMap<ChatTokenizer, Piece[]>();

/** Every token's piece, from the checkpoint's own tokenizer (a byte token may be part of a character). */
function piecesOf(tokenizer: ChatTokenizer, vocabSize: number): Piece[] {
  let pieces = piecesByTokenizer.get(tokenizer);
  if (pieces && pieces.length === vocabSize) return pieces;
  const specials = new Set<string>(SPECIAL_TOKENS);
  pieces = Array.from({ length: vocabSize }, (_, id) =>
    id >= 256 && specials.has(tokenizer.decode([id]))
      ? { special: id }
      : { bytes: Uint8Array.from(tokenBytes(tokenizer, id)) },
  );
  piecesByTokenizer.set(tokenizer, pieces);
  return pieces;
}

/**
 * Where a tool-call reply stands: before a call (`first`: none made yet), in a call's name (the
 * bytes so far), in its arguments, or after a call closed.
 */
type ToolCallState =
  { at: 'call'; first: boolean } | { at: 'name'; name: string } | { at: 'args'; json: JsonState } | { at: 'closed' };

type GrammarState =
  { kind: 'json'; json: JsonState } | { kind: 'tool_calls'; state: ToolCallState } | { kind: 'ended' };

function startOf(grammar: ReplyGrammar): GrammarState {
  return grammar.kind === 'json'
    ? { kind: 'json', json: jsonStart(grammar.shape) }
    : { kind: 'tool_calls', state: { at: 'call', first: true } };
}

function stepToolCall(grammar: Extract<ReplyGrammar, { kind: 'tool_calls' }>, s: ToolCallState, piece: Piece) {
  if ('special' in piece) {
    const id = piece.special;
    if (s.at === 'call' && id === CALL_START) return { at: 'name', name: '' } as const;
    if (s.at === 'args' && id === CALL_END && jsonComplete(s.json)) return { at: 'closed' } as const;
    if (s.at === 'closed' && id === CALL_START && grammar.parallel) return { at: 'name', name: '' } as const;
    return null;
  }
  if (s.at === 'args') {
    const json = feedJson(s.json, piece.bytes);
    return json && ({ at: 'args', json } as const);
  }
  if (s.at !== 'name') return null;
  // The name is one of the tools' names, written out, and the arguments' `{` follows it at once.
  let name = s.name;
  for (const [i, b] of piece.bytes.entries()) {
    const shape = b === 0x7b ? grammar.tools.get(name) : undefined;
    if (shape) {
      const json = feedJson(jsonStart(shape), piece.bytes.subarray(i));
      return json && ({ at: 'args', json } as const);
    }
    name += String.fromCharCode(b);
    if (![...grammar.tools.keys()].some((tool) => literalPrefix(tool, name))) return null;
  }
  return { at: 'name', name } as const;
}

/** Whether `bytes` (latin1 characters) begin the UTF-8 of `text`. */
function literalPrefix(text: string, bytes: string): boolean {
  return Buffer.from(text, 'utf8').toString('latin1').startsWith(bytes);
}

function step(grammar: ReplyGrammar, s: GrammarState, id: number, piece: Piece): GrammarState | null {
  if (s.kind === 'ended') return null;
  if (ENDS.has(id)) {
    const whole = s.kind === 'json' ? jsonComplete(s.json) : s.state.at === 'closed';
    return whole ? { kind: 'ended' } : null;
  }
  if (s.kind === 'json') {
    if ('special' in piece) return null;
    const json = feedJson(s.json, piece.bytes);
    return json && { kind: 'json', json };
  }
  const state = stepToolCall(grammar as Extract<ReplyGrammar, { kind: 'tool_calls' }>, s.state, piece);
  return state && { kind: 'tool_calls', state };
}

/**
 * One row's constraint: the mask of the tokens it may draw next, given the tokens it drew (fed
 * to the grammar as they come, each once). Every token of the vocabulary is checked at every
 * step — exact, so the log-prob reported is the constrained distribution's (sampling.ts); the
 * embedded vocabulary is 264 tokens, and a check is a few frames copied.
 */
export function rowConstraint(grammar: ReplyGrammar, tokenizer: ChatTokenizer, vocabSize: number) {
  const pieces = piecesOf(tokenizer, vocabSize);
  let state: GrammarState = startOf(grammar);
  let fed = 0;
  return (ids: readonly number[]): TokenMask => {
    for (; fed < ids.length; fed++) {
      const id = ids[fed] as number;
      const next = step(grammar, state, id, pieces[id] as Piece);
      if (next === null) throw new Error(`constrained decoding drew token ${id}, which its grammar refuses`);
      state = next;
    }
    const allow = new Set<number>();
    pieces.forEach((piece, id) => {
      if (('bytes' in piece && piece.bytes.length === 0) || step(grammar, state, id, piece) === null) return;
      allow.add(id);
    });
    if (allow.size === 0) throw new Error('constrained decoding reached a state no token continues');
    return { allow };
  };
}
