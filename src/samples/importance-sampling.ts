import { createHash } from 'node:crypto';
import type { z } from 'zod';
import type { sampleSettings } from './config.js';

/**
 * The off-policy correction a batch asks its trainer for (docs/training-objective.md): the
 * sampler's journaled log-probs against the parent's, ratio r = π_parent / π_sampler per trained
 * token; every kept token's weight times min(r, cap); under mask, tokens (level token) or whole
 * sequences (level sequence) whose ratio lies outside [low, high] get weight 0.
 */
export interface ImportanceSampling {
  mode: 'truncate' | 'mask';
  level: 'token' | 'sequence';
  cap: number;
  /** [low, high], low < 1 < high; mask mode only. */
  band?: [number, number];
}

type Samples = Pick<z.infer<typeof sampleSettings>, 'importanceWeightCap' | 'importanceSampling'>;

/** The correction the config asks for, or undefined for none (what `schedule: async` must not accept). */
export function importanceSamplingOf(samples: Samples): ImportanceSampling | undefined {
  const s = samples.importanceSampling;
  if (s === undefined)
    return samples.importanceWeightCap === undefined
      ? undefined
      : { mode: 'truncate', level: 'token', cap: samples.importanceWeightCap };
  if (s.mode === 'truncate') return { mode: 'truncate', level: 'token', cap: s.cap as number };
  const band = s.band as [number, number]; // length 2: the schema checked it
  return { mode: 'mask', level: s.level, cap: s.cap ?? band[1], band };
}

/**
 * Batch metadata keys of the correction. A batch with `importance_sampling` hashes them into its
 * content hash (a trainer must never reuse an update made under another objective); one with only
 * `importance_weight_cap` (written before masking existed) is a truncate batch hashed on its
 * tensors alone, as it always was.
 */
const KEYS = [
  'importance_band_high',
  'importance_band_low',
  'importance_level',
  'importance_sampling',
  'importance_weight_cap',
] as const;

export function importanceMetadata(sampling: ImportanceSampling | undefined): Record<string, string> {
  if (!sampling) return {};
  return {
    importance_sampling: sampling.mode,
    importance_level: sampling.level,
    importance_weight_cap: String(sampling.cap),
    ...(sampling.band && {
      importance_band_low: String(sampling.band[0]),
      importance_band_high: String(sampling.band[1]),
    }),
  };
}

/** The content hash of a batch: its tensors' hash, and with a correction, the correction's keys too. */
export function batchContentHash(tensorsHash: string, metadata: Record<string, string | undefined>): string {
  if (metadata.importance_sampling === undefined) return tensorsHash;
  const objective = KEYS.filter((k) => metadata[k] !== undefined)
    .map((k) => `${k}=${metadata[k]};`)
    .join('');
  return createHash('sha256').update(`${tensorsHash}\n${objective}`).digest('hex');
}

const fix = 'rebuild the batch with this version of Rein';

/** The correction a batch's metadata asks for; an error naming the key for anything a trainer cannot honour. */
export function importanceSamplingFromMetadata(metadata: Record<string, string>): ImportanceSampling | undefined {
  const number = (key: string): number => {
    const text = metadata[key];
    const value = Number(text);
    if (text === undefined || text.trim() === '' || !Number.isFinite(value) || value <= 0)
      throw new Error(`batch metadata ${key} ${JSON.stringify(text ?? null)} is not a positive number; ${fix}`);
    return value;
  };
  const mode = metadata.importance_sampling;
  if (mode === undefined) {
    const strays = KEYS.filter((k) => k !== 'importance_weight_cap' && metadata[k] !== undefined);
    if (strays.length > 0)
      throw new Error(`batch metadata has ${strays.join(', ')} without importance_sampling; ${fix}`);
    return metadata.importance_weight_cap === undefined
      ? undefined
      : { mode: 'truncate', level: 'token', cap: number('importance_weight_cap') };
  }
  if (mode !== 'truncate' && mode !== 'mask')
    throw new Error(`batch metadata importance_sampling ${JSON.stringify(mode)} is not truncate or mask; ${fix}`);
  const level = metadata.importance_level;
  if (level !== 'token' && level !== 'sequence')
    throw new Error(
      `batch metadata importance_level ${JSON.stringify(level ?? null)} is not token or sequence; ${fix}`,
    );
  const cap = number('importance_weight_cap');
  if (mode === 'truncate') {
    if (level !== 'token' || metadata.importance_band_low !== undefined || metadata.importance_band_high !== undefined)
      throw new Error(`batch metadata: importance_sampling truncate takes level token and no band; ${fix}`);
    return { mode, level, cap };
  }
  const band: [number, number] = [number('importance_band_low'), number('importance_band_high')];
  if (!(band[0] < 1 && band[1] > 1))
    throw new Error(`batch metadata importance band [${band.join(', ')}] does not hold 1 strictly inside; ${fix}`);
  return { mode, level, cap, band };
}
