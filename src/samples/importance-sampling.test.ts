import { describe, expect, it } from 'vitest';
import { decodeBatch, encodeBatch } from './batch-artifact.js';
import type { Batch } from './batch.js';
import { sampleSettings } from './config.js';
import { importanceSamplingOf, type ImportanceSampling } from './importance-sampling.js';
import { decodeSafetensors, encodeSafetensors } from './safetensors.js';

const problems = (samples: unknown) => {
  const parsed = sampleSettings.safeParse(samples);
  return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};

describe('samples.importanceSampling', () => {
  it('resolves to the correction the trainers apply; the bare cap is truncation', () => {
    const of = (samples: object) => importanceSamplingOf(sampleSettings.parse(samples));
    expect(of({})).toBeUndefined();
    expect(of({ importanceWeightCap: 2 })).toEqual({ mode: 'truncate', level: 'token', cap: 2 });
    expect(of({ importanceSampling: { mode: 'truncate', cap: 3 } })).toEqual({
      mode: 'truncate',
      level: 'token',
      cap: 3,
    });
    // Under mask the cap defaults to the band's high: inside the band a token ratio is kept as it is.
    expect(of({ importanceSampling: { mode: 'mask', band: [0.5, 2] } })).toEqual({
      mode: 'mask',
      level: 'token',
      cap: 2,
      band: [0.5, 2],
    });
    expect(of({ importanceSampling: { mode: 'mask', level: 'sequence', band: [0.8, 1.25], cap: 4 } })).toMatchObject({
      level: 'sequence',
      cap: 4,
    });
  });

  it('refuses shapes that cannot mean anything, naming the fix', () => {
    expect(problems({ importanceSampling: { mode: 'truncate' } })).toEqual([
      'importanceSampling.cap: mode truncate needs a cap (e.g. cap: 2)',
    ]);
    expect(problems({ importanceSampling: { mode: 'mask' } })[0]).toMatch(/band: mode mask needs band: \[low, high\]/);
    expect(problems({ importanceSampling: { mode: 'mask', band: [1.2, 2] } })[0]).toMatch(
      /band \[1\.2, 2\] must hold 1 strictly inside \(low < 1 < high\)/,
    );
    expect(problems({ importanceSampling: { mode: 'truncate', cap: 2, level: 'sequence' } })[0]).toMatch(
      /level sequence applies to mode mask only/,
    );
    expect(problems({ importanceSampling: { mode: 'truncate', cap: 2, band: [0.5, 2] } })[0]).toMatch(
      /a band applies to mode mask only/,
    );
    expect(problems({ importanceWeightCap: 2, importanceSampling: { mode: 'truncate', cap: 2 } })).toEqual([
      'importanceWeightCap: importanceWeightCap and importanceSampling are both set; move the cap into importanceSampling.cap and remove importanceWeightCap',
    ]);
  });
});

describe('the correction in the batch artifact', () => {
  const batch: Pick<Batch, 'sequences'> = {
    sequences: [
      {
        rolloutId: 'r',
        ids: [1, 2, 3],
        lossMask: [0, 1, 1],
        oldLogprobs: [0, -1, -2],
        spans: [{ start: 0, end: 3, callId: 'c', choice: 0, policyVersion: 'v1', finishReason: 'stop' }],
        advantage: 1,
        weight: 0.5,
      },
    ],
  };
  const identity = { iteration: 1, policyVersion: 'v1', configHash: 'c' };
  const encode = (importanceSampling?: ImportanceSampling) =>
    encodeBatch(batch as Batch, { ...identity, ...(importanceSampling && { importanceSampling }) });
  const mask: ImportanceSampling = { mode: 'mask', level: 'sequence', cap: 2, band: [0.5, 2] };

  it('travels in the metadata, is read back, and enters the content hash', () => {
    const { bytes, contentHash } = encode(mask);
    const decoded = decodeBatch(bytes);
    expect(decoded.importanceSampling).toEqual(mask);
    expect(decoded.metadata).toMatchObject({
      importance_sampling: 'mask',
      importance_level: 'sequence',
      importance_weight_cap: '2',
      importance_band_low: '0.5',
      importance_band_high: '2',
    });
    expect(new Set([contentHash, encode().contentHash, encode({ ...mask, level: 'token' }).contentHash]).size).toBe(3);
    // A bare cap (batches from before masking) is hashed on the tensors alone, as it was.
    const capped = encodeBatch(batch as Batch, { ...identity, importanceWeightCap: 2 });
    expect(capped.contentHash).toBe(encode().contentHash);
    expect(decodeBatch(capped.bytes).importanceSampling).toEqual({ mode: 'truncate', level: 'token', cap: 2 });
  });

  it('is refused when edited after the fact or not understood', () => {
    const { bytes } = encode(mask);
    const { tensors, metadata } = decodeSafetensors(bytes);
    const edited = (changes: Record<string, string>) => encodeSafetensors(tensors, { ...metadata, ...changes });
    expect(() => decodeBatch(edited({ importance_band_low: '0.1' }))).toThrow(/content hash does not match/);
    // Without importance_sampling the hash is the tensors' alone: stray keys are then the problem named.
    const unhashed: Record<string, string> = { ...metadata, content_hash: encode().contentHash };
    delete unhashed.importance_sampling;
    expect(() => decodeBatch(encodeSafetensors(tensors, unhashed))).toThrow(
      /importance_band_high, importance_band_low, importance_level without importance_sampling/,
    );
  });
});
