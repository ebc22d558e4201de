import * as tf from '@tensorflow/tfjs';
import type { ModelConfig } from './model-config.js';

/** Per-layer keys (after q/k norm and rotation) and values of the positions seen so far. */
// A type, not an interface, so tf.tidy can return it.
export type LayerCache = {
  /** [rows, kvHeads, headDim, columns]: transposed, so scores need no transpose. */
  keysT: tf.Tensor4D;
  /** [rows, kvHeads, columns, headDim] */
  values: tf.Tensor4D;
};

/** What decoding needs of a model: its whole-prompt pass and its one-token step (Qwen3Model). */
export interface CachedForward {
  readonly config: ModelConfig;
  prefill(prompts: number[][]): { lastLogits: number[][]; caches: LayerCache[][] };
  stepWithCache(
    tokens: number[],
    positions: number[],
    caches: LayerCache[],
    padMask: tf.Tensor4D,
  ): { logits: tf.Tensor2D; caches: LayerCache[] };
}

/**
 * Incremental decoding of many rows at once with a key/value cache. Every row's cache ends at the
 * same column: a shorter row is padded on the left, and those columns are masked out of its
 * attention (exp(−1e9) is exactly 0), so a step is one batched pass whatever the rows' lengths,
 * and each row's positions (for the rotation) are its own.
 */
export class Decoder {
  private keys: number[] = [];
  private lengths: number[] = [];
  private caches: LayerCache[] = [];
  private columns = 0;

  constructor(private readonly model: CachedForward) {}

  rows(): number[] {
    return [...this.keys];
  }

  /** Adds rows with their prompts; returns the logits for each new row's first token. */
  add(rows: Array<{ key: number; ids: number[] }>): Map<number, number[]> {
    const out = new Map<number, number[]>();
    if (rows.length === 0) return out;
    const limit = this.model.config.maxPositions;
    for (const r of rows) {
      if (r.ids.length === 0) throw new Error('a prompt needs at least one token');
      if (r.ids.length > limit) throw new Error(`a prompt of ${r.ids.length} tokens exceeds the context of ${limit}`);
      if (this.keys.includes(r.key)) throw new Error(`row ${r.key} is already decoding`);
    }
    const { lastLogits, caches } = this.model.prefill(rows.map((r) => r.ids));
    const columns = Math.max(this.columns, ...rows.map((r) => r.ids.length));
    const merged = tf.tidy(() =>
      this.model.config.numLayers > 0
        ? Array.from({ length: this.model.config.numLayers }, (_, l) => {
            const parts = [
              ...(this.keys.length > 0 ? [leftPad(this.caches[l] as LayerCache, columns - this.columns)] : []),
              ...caches.map((row, i) =>
                leftPad(row[l] as LayerCache, columns - (rows[i] as { ids: number[] }).ids.length),
              ),
            ];
            return {
              keysT: tf.concat(
                parts.map((p) => p.keysT),
                0,
              ) as tf.Tensor4D,
              values: tf.concat(
                parts.map((p) => p.values),
                0,
              ) as tf.Tensor4D,
            };
          })
        : [],
    );
    tf.dispose([...this.cacheTensors(), ...caches.flatMap((row) => row.flatMap((c) => [c.keysT, c.values]))]);
    this.caches = merged;
    this.columns = columns;
    rows.forEach((r, i) => {
      this.keys.push(r.key);
      this.lengths.push(r.ids.length);
      out.set(r.key, lastLogits[i] as number[]);
    });
    return out;
  }

  /** Feeds one token to every row (all of them, each exactly once); returns each row's next logits. */
  step(tokens: Array<{ key: number; id: number }>): Map<number, number[]> {
    const byKey = new Map(tokens.map((t) => [t.key, t.id]));
    if (byKey.size !== this.keys.length || this.keys.some((k) => !byKey.has(k)))
      throw new Error('a decoding step needs one token for every row');
    const limit = this.model.config.maxPositions;
    if (this.lengths.some((n) => n >= limit)) throw new Error(`a row reached the context of ${limit} tokens`);
    const width = this.columns + 1;
    const mask = new Float32Array(this.keys.length * width);
    this.lengths.forEach((n, row) => mask.fill(-1e9, row * width, row * width + width - (n + 1)));
    const { logits, caches } = tf.tidy(() =>
      this.model.stepWithCache(
        this.keys.map((k) => byKey.get(k) as number),
        [...this.lengths],
        this.caches,
        tf.tensor4d(mask, [this.keys.length, 1, 1, width]),
      ),
    );
    tf.dispose(this.cacheTensors());
    this.caches = caches;
    this.columns = width;
    this.lengths = this.lengths.map((n) => n + 1);
    const rows = logits.arraySync();
    logits.dispose();
    return new Map(this.keys.map((k, i) => [k, rows[i] as number[]]));
  }

  /** Drops rows (finished ones); trims columns no remaining row uses. */
  remove(keys: number[]): void {
    const keep = this.keys.map((k, i) => (keys.includes(k) ? -1 : i)).filter((i) => i >= 0);
    if (keep.length === this.keys.length) return;
    if (keep.length === 0) {
      this.dispose();
      return;
    }
    const longest = Math.max(...keep.map((i) => this.lengths[i] as number));
    const drop = this.columns - longest;
    const caches = tf.tidy(() => {
      const rows = tf.tensor1d(keep, 'int32');
      return this.caches.map((c) => ({
        keysT: tf.gather(c.keysT, rows).slice([0, 0, 0, drop], [-1, -1, -1, longest]) as tf.Tensor4D,
        values: tf.gather(c.values, rows).slice([0, 0, drop, 0], [-1, -1, longest, -1]) as tf.Tensor4D,
      }));
    });
    tf.dispose(this.cacheTensors());
    this.caches = caches;
    this.columns = longest;
    this.keys = keep.map((i) => this.keys[i] as number);
    this.lengths = keep.map((i) => this.lengths[i] as number);
  }

  dispose(): void {
    tf.dispose(this.cacheTensors());
    this.caches = [];
    this.keys = [];
    this.lengths = [];
    this.columns = 0;
  }

  private cacheTensors(): tf.Tensor[] {
    return this.caches.flatMap((c) => [c.keysT, c.values]);
  }
}

function leftPad(cache: LayerCache, columns: number): LayerCache {
  if (columns === 0) return cache;
  return {
    keysT: cache.keysT.pad([
      [0, 0],
      [0, 0],
      [0, 0],
      [columns, 0],
    ]) as tf.Tensor4D,
    values: cache.values.pad([
      [0, 0],
      [0, 0],
      [columns, 0],
      [0, 0],
    ]) as tf.Tensor4D,
  };
}
