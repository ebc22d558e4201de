/**
 * The byte-level states of JSON scalars: strings (UTF-8 checked byte by byte, so a character split
 * across tokens is fine and an invalid sequence is refused at its first bad byte), numbers, and
 * literals (an enum's canonical texts, true/false/null, a closed object's property names). Each
 * step takes one byte and gives the next state, 'end' when the byte closes the value, 'pass'
 * when the value was already complete and the byte belongs to what follows, or null: refused.
 */
export interface StringState {
  t: 'string';
  /** Raw bytes so far as latin1 characters, kept for object keys only (to decode the key at its end). */
  raw: string | null;
  /** 1 just after a backslash; 2–5: that many hex digits of a \u escape still to come. */
  escape: number;
  /** UTF-8 continuation bytes still to come, and the range the next one must be in. */
  more: number;
  lo: number;
  hi: number;
}

export type NumberPhase = 'sign' | 'zero' | 'int' | 'dot' | 'frac' | 'exp' | 'expSign' | 'expDigits';
export interface NumberState {
  t: 'number';
  integer: boolean;
  phase: NumberPhase;
}

export interface LiteralState {
  t: 'literal';
  /** The texts (UTF-8 bytes as latin1 characters) the bytes so far are a prefix of. */
  texts: readonly string[];
  at: number;
  key: boolean;
}

export type Step<S> = S | 'end' | 'pass' | null;

const isDigit = (b: number) => b >= 0x30 && b <= 0x39;
const isHex = (b: number) => isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);
export const isWhitespace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

export function newString(key: boolean): StringState {
  return { t: 'string', raw: key ? '' : null, escape: 0, more: 0, lo: 0x80, hi: 0xbf };
}

/** A UTF-8 lead byte: how many continuation bytes follow and the first one's range (no overlongs, surrogates). */
function leadByte(b: number): { more: number; lo: number; hi: number } | null {
  if (b >= 0xc2 && b <= 0xdf) return { more: 1, lo: 0x80, hi: 0xbf };
  if (b === 0xe0) return { more: 2, lo: 0xa0, hi: 0xbf };
  if (b === 0xed) return { more: 2, lo: 0x80, hi: 0x9f };
  if (b >= 0xe1 && b <= 0xef) return { more: 2, lo: 0x80, hi: 0xbf };
  if (b === 0xf0) return { more: 3, lo: 0x90, hi: 0xbf };
  if (b >= 0xf1 && b <= 0xf3) return { more: 3, lo: 0x80, hi: 0xbf };
  if (b === 0xf4) return { more: 3, lo: 0x80, hi: 0x8f };
  return null;
}

export function stepString(s: StringState, b: number): Step<StringState> {
  const raw = s.raw === null ? null : s.raw + String.fromCharCode(b);
  if (s.more > 0) {
    if (b < s.lo || b > s.hi) return null;
    return { ...s, raw, more: s.more - 1, lo: 0x80, hi: 0xbf };
  }
  if (s.escape === 1) {
    if (b === 0x75) return { ...s, raw, escape: 5 };
    return '"\\/bfnrt'.includes(String.fromCharCode(b)) ? { ...s, raw, escape: 0 } : null;
  }
  if (s.escape > 1) return isHex(b) ? { ...s, raw, escape: s.escape === 2 ? 0 : s.escape - 1 } : null;
  if (b === 0x22) return 'end';
  if (b === 0x5c) return { ...s, raw, escape: 1 };
  if (b < 0x20) return null;
  if (b < 0x80) return s.raw === null ? s : { ...s, raw };
  const lead = leadByte(b);
  return lead && { ...s, raw, ...lead };
}

/** The key a closed key string spells (its raw bytes are valid UTF-8 and escapes by construction). */
export function keyOf(s: StringState): string {
  return JSON.parse(`"${Buffer.from(s.raw ?? '', 'latin1').toString('utf8')}"`) as string;
}

const NUMBER_COMPLETE = new Set<NumberPhase>(['zero', 'int', 'frac', 'expDigits']);

export function numberComplete(s: NumberState): boolean {
  return NUMBER_COMPLETE.has(s.phase);
}

/** A number's first byte: `-` or a digit. */
export function newNumber(integer: boolean, b: number): NumberState | null {
  if (b === 0x2d) return { t: 'number', integer, phase: 'sign' };
  if (!isDigit(b)) return null;
  return { t: 'number', integer, phase: b === 0x30 ? 'zero' : 'int' };
}

function nextPhase(s: NumberState, b: number): NumberPhase | null {
  const digit = isDigit(b);
  switch (s.phase) {
    case 'sign':
      return digit ? (b === 0x30 ? 'zero' : 'int') : null;
    case 'zero':
    case 'int':
      if (digit) return s.phase === 'int' ? 'int' : null;
      if (s.integer) return null;
      return b === 0x2e ? 'dot' : b === 0x65 || b === 0x45 ? 'exp' : null;
    case 'dot':
      return digit ? 'frac' : null;
    case 'frac':
      return digit ? 'frac' : b === 0x65 || b === 0x45 ? 'exp' : null;
    case 'exp':
      return digit ? 'expDigits' : b === 0x2b || b === 0x2d ? 'expSign' : null;
    case 'expSign':
    case 'expDigits':
      return digit ? 'expDigits' : null;
  }
}

export function stepNumber(s: NumberState, b: number): Step<NumberState> {
  const phase = nextPhase(s, b);
  if (phase) return { ...s, phase };
  return numberComplete(s) ? 'pass' : null;
}

export function literalBytes(text: string): string {
  return Buffer.from(text, 'utf8').toString('latin1');
}

/** A literal's first byte: the texts that start with it. */
export function newLiteral(texts: readonly string[], b: number, key = false): LiteralState | null {
  return stepLiteral({ t: 'literal', texts, at: 0, key }, b) as LiteralState | null;
}

export function literalComplete(s: LiteralState): string | undefined {
  return s.texts.find((t) => t.length === s.at);
}

export function stepLiteral(s: LiteralState, b: number): Step<LiteralState> {
  const texts = s.texts.filter((t) => t.charCodeAt(s.at) === b);
  if (texts.length > 0) return { ...s, texts, at: s.at + 1 };
  return literalComplete(s) !== undefined ? 'pass' : null;
}
