import { createHash } from 'node:crypto';

/**
 * The safetensors format (as the Python `safetensors` library reads it): an 8-byte little-endian
 * header length, a JSON header naming each tensor's dtype, shape and byte range, an optional
 * `__metadata__` map of strings, then the raw little-endian data.
 */
export type DType = 'I32' | 'F32' | 'U8' | 'I64' | 'BF16' | 'F16';

export interface Tensor {
  dtype: DType;
  shape: number[];
  /** BF16 and F16 values as their raw 16 bits. */
  data: Int32Array | Float32Array | Uint8Array | BigInt64Array | Uint16Array;
}

const BYTES: Record<DType, number> = { I32: 4, F32: 4, U8: 1, I64: 8, BF16: 2, F16: 2 };

export function encodeSafetensors(tensors: Record<string, Tensor>, metadata: Record<string, string> = {}): Buffer {
  assertLittleEndian();
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  const names = Object.keys(tensors).sort();
  for (const name of names) {
    const t = tensors[name] as Tensor;
    const elements = t.shape.reduce((a, b) => a * b, 1);
    if (elements !== t.data.length)
      throw new Error(`tensor ${name}: shape ${JSON.stringify(t.shape)} does not hold ${t.data.length} values`);
    const size = elements * BYTES[t.dtype];
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  let json = JSON.stringify(header);
  // Pad the header with spaces so the data starts 8-byte aligned, as the reference writer does.
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8);
  const headerBytes = Buffer.from(json, 'utf8');
  const out = Buffer.alloc(8 + headerBytes.length + offset);
  out.writeBigUInt64LE(BigInt(headerBytes.length), 0);
  headerBytes.copy(out, 8);
  let at = 8 + headerBytes.length;
  for (const name of names) {
    const t = tensors[name] as Tensor;
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    bytes.copy(out, at);
    at += bytes.length;
  }
  return out;
}

function readHeader(buffer: Buffer): { header: Record<string, unknown>; dataStart: number } {
  if (buffer.length < 8) throw new Error('not a safetensors file: shorter than its header length');
  const headerLength = Number(buffer.readBigUInt64LE(0));
  if (8 + headerLength > buffer.length) throw new Error('not a safetensors file: header runs past the end');
  return {
    header: JSON.parse(buffer.subarray(8, 8 + headerLength).toString('utf8')) as Record<string, unknown>,
    dataStart: 8 + headerLength,
  };
}

/** The `__metadata__` strings alone, without copying any tensor. */
export function safetensorsMetadata(buffer: Buffer): Record<string, string> {
  return (readHeader(buffer).header.__metadata__ as Record<string, string> | undefined) ?? {};
}

export function decodeSafetensors(buffer: Buffer): {
  tensors: Record<string, Tensor>;
  metadata: Record<string, string>;
} {
  assertLittleEndian();
  const { header, dataStart } = readHeader(buffer);
  const tensors: Record<string, Tensor> = {};
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const {
      dtype,
      shape,
      data_offsets: [begin, end],
    } = entry as { dtype: DType; shape: number[]; data_offsets: [number, number] };
    if (!(dtype in BYTES)) throw new Error(`tensor ${name}: unsupported dtype ${dtype}`);
    const bytes = Uint8Array.prototype.slice.call(buffer, dataStart + begin, dataStart + end);
    const data =
      dtype === 'I32'
        ? new Int32Array(bytes.buffer)
        : dtype === 'F32'
          ? new Float32Array(bytes.buffer)
          : dtype === 'I64'
            ? new BigInt64Array(bytes.buffer)
            : dtype === 'BF16' || dtype === 'F16'
              ? new Uint16Array(bytes.buffer)
              : bytes;
    tensors[name] = { dtype, shape, data };
  }
  return { tensors, metadata: (header.__metadata__ as Record<string, string> | undefined) ?? {} };
}

/** SHA-256 over the tensors' names, dtypes, shapes and bytes: the batch's content hash. */
export function tensorsHash(tensors: Record<string, Tensor>): string {
  const hash = createHash('sha256');
  for (const name of Object.keys(tensors).sort()) {
    const t = tensors[name] as Tensor;
    hash.update(`${name}:${t.dtype}:${t.shape.join('x')};`);
    hash.update(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  }
  return hash.digest('hex');
}

/** Typed arrays use the host's byte order and the format is little-endian, as every supported host is. */
function assertLittleEndian(): void {
  if (new Uint8Array(new Uint32Array([1]).buffer)[0] !== 1)
    throw new Error('safetensors I/O needs a little-endian host');
}
