/**
 * Compact binary forms for token ids and log-probs (little-endian int32 / float32), and the
 * prefix-delta encoding that keeps a multi-turn rollout's journal linear in its length: a prompt
 * that extends an earlier call's prompt+completion is stored as (reference, prefix length, suffix).
 */

type NumberKind = 'i32' | 'f32';
const NULL_SEGMENT = 0xffffffff;

export function packNumbers(values: ArrayLike<number>, kind: NumberKind): Buffer {
  const buffer = Buffer.allocUnsafe(values.length * 4);
  const view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  for (let i = 0; i < values.length; i++) {
    if (kind === 'i32') view.setInt32(i * 4, values[i] as number, true);
    else view.setFloat32(i * 4, values[i] as number, true);
  }
  return buffer;
}

export function unpackNumbers(buffer: Uint8Array, kind: NumberKind): number[] {
  const view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  const out = new Array<number>(buffer.byteLength / 4);
  for (let i = 0; i < out.length; i++)
    out[i] = kind === 'i32' ? view.getInt32(i * 4, true) : view.getFloat32(i * 4, true);
  return out;
}

/** Several arrays (one per choice) in one buffer: count, lengths (or a null marker), values. */
export function packSegments(segments: ReadonlyArray<ArrayLike<number> | null>, kind: NumberKind): Buffer {
  const header = Buffer.allocUnsafe(4 * (1 + segments.length));
  header.writeUInt32LE(segments.length, 0);
  segments.forEach((s, i) => header.writeUInt32LE(s === null ? NULL_SEGMENT : s.length, 4 * (i + 1)));
  return Buffer.concat([header, ...segments.filter((s) => s !== null).map((s) => packNumbers(s, kind))]);
}

export function unpackSegments(buffer: Uint8Array, kind: NumberKind): Array<number[] | null> {
  const bytes = Buffer.from(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  const count = bytes.readUInt32LE(0);
  let offset = 4 * (1 + count);
  const out: Array<number[] | null> = [];
  for (let i = 0; i < count; i++) {
    const length = bytes.readUInt32LE(4 * (i + 1));
    if (length === NULL_SEGMENT) {
      out.push(null);
      continue;
    }
    out.push(unpackNumbers(bytes.subarray(offset, offset + length * 4), kind));
    offset += length * 4;
  }
  return out;
}

export function commonPrefixLength(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

export interface PromptDelta {
  /** The earlier call whose sequence this prompt extends, or null when stored whole. */
  ref: string | null;
  prefixLength: number;
  suffix: number[];
}

/** Below this many shared tokens a reference costs more to follow than it saves. */
const MIN_SHARED_PREFIX = 8;

export function encodePrompt(
  prompt: readonly number[],
  base: { callId: string; ids: readonly number[] } | undefined,
): PromptDelta {
  const shared = base ? commonPrefixLength(prompt, base.ids) : 0;
  if (!base || shared < MIN_SHARED_PREFIX) return { ref: null, prefixLength: 0, suffix: [...prompt] };
  return { ref: base.callId, prefixLength: shared, suffix: prompt.slice(shared) };
}

export function decodePrompt(delta: PromptDelta, baseIds: (callId: string) => readonly number[]): number[] {
  if (delta.ref === null) return delta.suffix;
  const base = baseIds(delta.ref);
  if (base.length < delta.prefixLength) {
    throw new Error(
      `journal corrupt: call ${delta.ref} has ${base.length} ids, fewer than the ${delta.prefixLength} referenced`,
    );
  }
  return [...base.slice(0, delta.prefixLength), ...delta.suffix];
}
