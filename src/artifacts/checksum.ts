import { createHash } from 'node:crypto';
import { ArtifactChecksumError } from './artifact-store.js';

export const sha256Of = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

/** The bytes, when they hash to what the writer recorded; else an error naming the URI. */
export function verified(uri: string, data: Buffer, expected: string | undefined): Buffer {
  if (expected === undefined) return data;
  const actual = sha256Of(data);
  if (actual !== expected) throw new ArtifactChecksumError(uri, expected, actual);
  return data;
}
