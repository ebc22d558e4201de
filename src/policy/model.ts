import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import { seededRandom } from '../random.js';
import type { Tensor } from '../samples/safetensors.js';

/**
 * The embedded policy: a Qwen3 decoder (Hugging Face's `Qwen3ForCausalLM`: RMSNorm, rotary
 * positions, grouped-query attention with per-head q/k RMSNorm, SwiGLU MLP) in tfjs on the wasm
 * backend, with Hugging Face's tensor names, so the same folder loads in transformers and vLLM.
 *
 * Shaped around the wasm backend's limits: tokens are embedded as one-hot × matrix (the gradient
 * of gather is missing there), linear weights are kept transposed ([in, out]) and matMul never
 * uses transpose flags (~8× slower there), no tensor has more than 4 dimensions, and the rotary
 * half-rotation is a matMul with a fixed ±1 matrix rather than slices.
 */
export interface ModelConfig {
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  /** The context: prompt and completion together. */
  maxPositions: number;
  ropeTheta: number;
  rmsNormEps: number;
  tieWordEmbeddings: boolean;
}

let backendReady: Promise<string> | undefined;

/** Picks the wasm backend, or the pure-JS cpu backend where wasm cannot start. */
export function readyBackend(): Promise<string> {
  backendReady ??= (async () => {
    try {
      if (await tf.setBackend('wasm')) {
        await tf.ready();
        return 'wasm';
      }
    } catch {
      // Falls through to cpu.
    }
    await tf.setBackend('cpu');
    await tf.ready();
    return 'cpu';
  })();
  return backendReady;
}

/** A weight as Hugging Face names and shapes it; `linear` ones are stored transposed here. */
interface WeightSpec {
  shape: number[];
  linear: boolean;
}

export function weightSpecs(c: ModelConfig): Record<string, WeightSpec> {
  const [H, I, q, kv] = [c.hiddenSize, c.intermediateSize, c.numHeads * c.headDim, c.numKvHeads * c.headDim];
  const linear = (out: number, inp: number): WeightSpec => ({ shape: [out, inp], linear: true });
  const vector = (n: number): WeightSpec => ({ shape: [n], linear: false });
  const specs: Record<string, WeightSpec> = { 'model.embed_tokens.weight': { shape: [c.vocabSize, H], linear: false } };
  for (let l = 0; l < c.numLayers; l++) {
    const p = `model.layers.${l}.`;
    Object.assign(specs, {
      [`${p}input_layernorm.weight`]: vector(H),
      [`${p}self_attn.q_proj.weight`]: linear(q, H),
      [`${p}self_attn.k_proj.weight`]: linear(kv, H),
      [`${p}self_attn.v_proj.weight`]: linear(kv, H),
      [`${p}self_attn.o_proj.weight`]: linear(H, q),
      [`${p}self_attn.q_norm.weight`]: vector(c.headDim),
      [`${p}self_attn.k_norm.weight`]: vector(c.headDim),
      [`${p}post_attention_layernorm.weight`]: vector(H),
      [`${p}mlp.gate_proj.weight`]: linear(I, H),
      [`${p}mlp.up_proj.weight`]: linear(I, H),
      [`${p}mlp.down_proj.weight`]: linear(H, I),
    });
  }
  specs['model.norm.weight'] = vector(H);
  if (!c.tieWordEmbeddings) specs['lm_head.weight'] = linear(c.vocabSize, H);
  return specs;
}

// Variables stay unnamed: tfjs names are global, and several policy versions live side by side.
type Weights = Record<string, tf.Variable>;

/** Per-layer keys (after q/k norm and rotation) and values of the positions seen so far. */
// A type, not an interface, so tf.tidy can return it.
type LayerCache = {
  /** [rows, kvHeads, headDim, columns]: transposed, so scores need no transpose. */
  keysT: tf.Tensor4D;
  /** [rows, kvHeads, columns, headDim] */
  values: tf.Tensor4D;
};

export class Qwen3Model {
  private readonly rope: { cos: tf.Tensor2D; sin: tf.Tensor2D; rotateHalf: tf.Tensor2D };

  private constructor(
    readonly config: ModelConfig,
    readonly weights: Weights,
  ) {
    this.rope = ropeTables(config);
  }

  /** Fresh weights, deterministic for a seed. */
  static init(config: ModelConfig, seed: number): Qwen3Model {
    validateConfig(config);
    const weights: Weights = {};
    let s = seed;
    for (const [name, { shape, linear }] of Object.entries(weightSpecs(config))) {
      const seedOfWeight = s++;
      const stored = linear ? [shape[1] as number, shape[0] as number] : shape;
      weights[name] = tf.tidy(() =>
        tf.variable(
          shape.length === 1 ? tf.ones(stored) : tf.randomNormal(stored, 0, linear ? 1 / Math.sqrt(stored[0] as number) : 0.02, 'float32', seedOfWeight),
          true,
        ),
      );
    }
    return new Qwen3Model(config, weights);
  }

  /** Weights by Hugging Face name and layout ([out, in] for linear layers), float32. */
  toTensors(): Record<string, Tensor> {
    const specs = weightSpecs(this.config);
    const tensors: Record<string, Tensor> = {};
    for (const [name, variable] of Object.entries(this.weights)) {
      const spec = specs[name] as WeightSpec;
      const data = tf.tidy(() => (spec.linear ? variable.transpose() : variable).dataSync() as Float32Array);
      tensors[name] = { dtype: 'F32', shape: spec.shape, data };
    }
    return tensors;
  }

  /**
   * A model from Hugging Face-named tensors (F32, F16 or BF16). A tied model ignores a stored
   * `lm_head.weight` (transformers writes none; some tools write a copy).
   */
  static fromTensors(config: ModelConfig, tensors: Record<string, Tensor>): Qwen3Model {
    validateConfig(config);
    const weights: Weights = {};
    try {
      for (const [name, { shape, linear }] of Object.entries(weightSpecs(config))) {
        const t = tensors[name];
        if (!t || t.shape.join('x') !== shape.join('x')) {
          throw new Error(`weights do not fit the config: ${name} is ${t ? t.shape.join('x') : 'missing'}, expected ${shape.join('x')}`);
        }
        const values = floatValues(t);
        weights[name] = tf.tidy(() => {
          const stored = tf.tensor(values, shape, 'float32');
          return tf.variable(linear ? stored.transpose() : stored, true);
        });
      }
    } catch (err) {
      tf.dispose(Object.values(weights));
      throw err;
    }
    return new Qwen3Model(config, weights);
  }

  dispose(): void {
    tf.dispose([...Object.values(this.weights), this.rope.cos, this.rope.sin, this.rope.rotateHalf]);
  }

  private w(name: string): tf.Variable {
    return this.weights[name] as tf.Variable;
  }

  private headWeight(): tf.Tensor2D {
    return this.config.tieWordEmbeddings ? (this.w('model.embed_tokens.weight').transpose() as tf.Tensor2D) : (this.w('lm_head.weight') as tf.Tensor2D);
  }

  /** Logits [B, T, V] for token ids [B][T] (rows the same length; pad on the right: attention is causal). */
  logits(ids: number[][]): tf.Tensor3D {
    return tf.tidy(() => this.forward(ids).logits);
  }

  /**
   * The whole-sequence pass, for training and for prefill: logits [B, T, V] and, per layer, the
   * keys and values of every position.
   */
  private forward(ids: number[][]): { logits: tf.Tensor3D; caches: LayerCache[] } {
    const c = this.config;
    const B = ids.length;
    const T = ids[0]?.length ?? 0;
    if (T > c.maxPositions) throw new Error(`sequence of ${T} tokens exceeds the context of ${c.maxPositions}`);
    const [nH, nKV, hd] = [c.numHeads, c.numKvHeads, c.headDim];
    const rep = nH / nKV;
    const cos = this.rope.cos.slice([0, 0], [T, hd]).reshape([1, T, 1, hd]);
    const sin = this.rope.sin.slice([0, 0], [T, hd]).reshape([1, T, 1, hd]);
    const causal = tf.linalg.bandPart(tf.ones([T, T]), -1, 0).sub(1).mul(1e9);
    let x = this.embed(ids.flat(), B * T);
    const caches: LayerCache[] = [];
    for (let l = 0; l < c.numLayers; l++) {
      const p = `model.layers.${l}.`;
      const h = rmsNorm(x, this.w(`${p}input_layernorm.weight`), c.rmsNormEps);
      const q = this.rotate(this.headNorm(matMul(h, this.w(`${p}self_attn.q_proj.weight`)), `${p}self_attn.q_norm.weight`).reshape([B, T, nH, hd]), cos, sin);
      const k = this.rotate(this.headNorm(matMul(h, this.w(`${p}self_attn.k_proj.weight`)), `${p}self_attn.k_norm.weight`).reshape([B, T, nKV, hd]), cos, sin);
      const v = matMul(h, this.w(`${p}self_attn.v_proj.weight`)).reshape([B, T, nKV, hd]);
      // Query heads of one key/value group are adjacent (Hugging Face's repeat_kv order), so a
      // group's queries stack into one matrix against its keys.
      const grouped = q.transpose([0, 2, 1, 3]).reshape([B, nKV, rep * T, hd]);
      const keysT = k.transpose([0, 2, 3, 1]) as tf.Tensor4D;
      const values = v.transpose([0, 2, 1, 3]) as tf.Tensor4D;
      caches.push({ keysT, values });
      const scores = matMul(grouped, keysT).mul(1 / Math.sqrt(hd)).reshape([B, nH, T, T]).add(causal);
      const attended = matMul(tf.softmax(scores).reshape([B, nKV, rep * T, T]), values)
        .reshape([B, nH, T, hd])
        .transpose([0, 2, 1, 3])
        .reshape([B * T, nH * hd]);
      x = x.add(matMul(attended, this.w(`${p}self_attn.o_proj.weight`)));
      x = x.add(this.mlp(rmsNorm(x, this.w(`${p}post_attention_layernorm.weight`), c.rmsNormEps), p));
    }
    const out = rmsNorm(x, this.w('model.norm.weight'), c.rmsNormEps);
    return { logits: matMul(out, this.headWeight()).reshape([B, T, c.vocabSize]) as tf.Tensor3D, caches };
  }

  private embed(ids: number[], n: number): tf.Tensor2D {
    const c = this.config;
    for (const id of ids) if (!(id >= 0 && id < c.vocabSize)) throw new Error(`token id ${id} is outside the vocabulary of ${c.vocabSize}`);
    return matMul(tf.oneHot(tf.tensor1d(ids, 'int32'), c.vocabSize), this.w('model.embed_tokens.weight')).reshape([n, c.hiddenSize]);
  }

  /** Qwen3's per-head RMSNorm of queries or keys, over head_dim. */
  private headNorm(projected: tf.Tensor, weight: string): tf.Tensor {
    const hd = this.config.headDim;
    const [rows, width] = projected.shape as [number, number];
    return rmsNorm(projected.reshape([(rows * width) / hd, hd]), this.w(weight), this.config.rmsNormEps);
  }

  /** x·cos + rotate_half(x)·sin over the last axis; cos and sin broadcast against x. */
  private rotate(x: tf.Tensor4D, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor4D {
    const hd = this.config.headDim;
    const halfTurned = matMul(x.reshape([-1, hd]), this.rope.rotateHalf).reshape(x.shape);
    return x.mul(cos).add(halfTurned.mul(sin)) as tf.Tensor4D;
  }

  private mlp(h: tf.Tensor, prefix: string): tf.Tensor {
    const gate = matMul(h, this.w(`${prefix}mlp.gate_proj.weight`));
    const up = matMul(h, this.w(`${prefix}mlp.up_proj.weight`));
    return matMul(gate.mul(tf.sigmoid(gate)).mul(up), this.w(`${prefix}mlp.down_proj.weight`));
  }

  /** Starts incremental decoding: rows join with their prompts and advance a token at a time against cached keys and values. */
  decoder(): Decoder {
    return new Decoder(this);
  }

  /** One decoding step for rows whose caches are aligned to the same last column (see Decoder). */
  stepWithCache(tokens: number[], positions: number[], caches: LayerCache[], padMask: tf.Tensor4D): { logits: tf.Tensor2D; caches: LayerCache[] } {
    const c = this.config;
    const B = tokens.length;
    const [nH, nKV, hd] = [c.numHeads, c.numKvHeads, c.headDim];
    const rep = nH / nKV;
    const at = tf.tensor1d(positions, 'int32');
    const cos = tf.gather(this.rope.cos, at).reshape([B, 1, 1, hd]);
    const sin = tf.gather(this.rope.sin, at).reshape([B, 1, 1, hd]);
    let x = this.embed(tokens, B);
    const next: LayerCache[] = [];
    for (let l = 0; l < c.numLayers; l++) {
      const p = `model.layers.${l}.`;
      const h = rmsNorm(x, this.w(`${p}input_layernorm.weight`), c.rmsNormEps);
      const q = this.rotate(this.headNorm(matMul(h, this.w(`${p}self_attn.q_proj.weight`)), `${p}self_attn.q_norm.weight`).reshape([B, 1, nH, hd]), cos, sin);
      const k = this.rotate(this.headNorm(matMul(h, this.w(`${p}self_attn.k_proj.weight`)), `${p}self_attn.k_norm.weight`).reshape([B, 1, nKV, hd]), cos, sin);
      const v = matMul(h, this.w(`${p}self_attn.v_proj.weight`)).reshape([B, nKV, 1, hd]);
      const cache = caches[l] as LayerCache;
      const keysT = tf.concat([cache.keysT, k.reshape([B, nKV, hd, 1])], 3) as tf.Tensor4D;
      const values = tf.concat([cache.values, v], 2) as tf.Tensor4D;
      next.push({ keysT, values });
      const scores = matMul(q.reshape([B, nKV, rep, hd]), keysT).mul(1 / Math.sqrt(hd)).add(padMask);
      const attended = matMul(tf.softmax(scores), values).reshape([B, nH * hd]);
      x = x.add(matMul(attended, this.w(`${p}self_attn.o_proj.weight`)));
      x = x.add(this.mlp(rmsNorm(x, this.w(`${p}post_attention_layernorm.weight`), c.rmsNormEps), p));
    }
    const out = rmsNorm(x, this.w('model.norm.weight'), c.rmsNormEps);
    return { logits: matMul(out, this.headWeight()) as tf.Tensor2D, caches: next };
  }

  /** Prefill: logits of each prompt's last position and its keys and values, per layer, trimmed to its length. */
  prefill(prompts: number[][]): { lastLogits: number[][]; caches: LayerCache[][] } {
    const width = Math.max(...prompts.map((p) => p.length));
    const padded = prompts.map((p) => [...p, ...new Array<number>(width - p.length).fill(0)]);
    let lastLogits: number[][] = [];
    const caches = tf.tidy(() => {
      const { logits, caches: full } = this.forward(padded);
      const flat = logits.reshape([prompts.length * width, this.config.vocabSize]);
      lastLogits = tf.gather(flat, tf.tensor1d(prompts.map((p, row) => row * width + p.length - 1), 'int32')).arraySync() as number[][];
      return prompts.map((p, row) =>
        full.map((cache) => ({
          keysT: cache.keysT.slice([row, 0, 0, 0], [1, -1, -1, p.length]) as tf.Tensor4D,
          values: cache.values.slice([row, 0, 0, 0], [1, -1, p.length, -1]) as tf.Tensor4D,
        })),
      );
    });
    return { lastLogits, caches };
  }

  /**
   * Samples up to maxTokens continuations for each prompt, stopping at a stop token. Returns the
   * sampled ids and the model's log-prob of each.
   */
  generate(
    prompts: number[][],
    options: { maxTokens: number; temperature: number; topP?: number; stopIds: number[]; seed: number },
  ): Array<{ ids: number[]; logprobs: number[]; stopped: boolean }> {
    const random = seededRandom(options.seed);
    const results = prompts.map(() => ({ ids: [] as number[], logprobs: [] as number[], stopped: false }));
    const decoder = this.decoder();
    try {
      let logits = decoder.add(prompts.map((p, i) => ({ key: i, ids: p })));
      for (let step = 0; step < options.maxTokens; step++) {
        const next: Array<{ key: number; id: number }> = [];
        for (const [key, row] of logits) {
          const r = results[key] as (typeof results)[number];
          const { id, logprob } = sampleToken(row, options.temperature, options.topP ?? 1, random());
          r.ids.push(id);
          r.logprobs.push(logprob);
          if (options.stopIds.includes(id)) r.stopped = true;
          if (r.stopped || step === options.maxTokens - 1 || prompts[key]!.length + r.ids.length >= this.config.maxPositions) decoder.remove([key]);
          else next.push({ key, id });
        }
        if (next.length === 0) break;
        logits = decoder.step(next);
      }
    } finally {
      decoder.dispose();
    }
    return results;
  }
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

  constructor(private readonly model: Qwen3Model) {}

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
              ...caches.map((row, i) => leftPad(row[l] as LayerCache, columns - (rows[i] as { ids: number[] }).ids.length)),
            ];
            return {
              keysT: tf.concat(parts.map((p) => p.keysT), 0) as tf.Tensor4D,
              values: tf.concat(parts.map((p) => p.values), 0) as tf.Tensor4D,
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
    if (byKey.size !== this.keys.length || this.keys.some((k) => !byKey.has(k))) throw new Error('a decoding step needs one token for every row');
    const limit = this.model.config.maxPositions;
    if (this.lengths.some((n) => n >= limit)) throw new Error(`a row reached the context of ${limit} tokens`);
    const width = this.columns + 1;
    const mask = new Float32Array(this.keys.length * width);
    this.lengths.forEach((n, row) => mask.fill(-1e9, row * width, row * width + width - (n + 1)));
    const { logits, caches } = tf.tidy(() => this.model.stepWithCache(
      this.keys.map((k) => byKey.get(k) as number),
      [...this.lengths],
      this.caches,
      tf.tensor4d(mask, [this.keys.length, 1, 1, width]),
    ));
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

function validateConfig(c: ModelConfig): void {
  const problems: string[] = [];
  if (c.numHeads % c.numKvHeads !== 0) problems.push(`num_attention_heads (${c.numHeads}) must be a multiple of num_key_value_heads (${c.numKvHeads})`);
  if (c.headDim % 2 !== 0) problems.push(`head_dim (${c.headDim}) must be even for rotary positions`);
  for (const [key, value] of Object.entries(c)) if (typeof value === 'number' && !(value > 0)) problems.push(`${key} must be positive, got ${value}`);
  if (problems.length) throw new Error(`invalid model config: ${problems.join('; ')}`);
}

/**
 * cos and sin of every position × frequency, as transformers computes them in float32
 * (inv_freq = 1 / θ^(2i/d), angle = position · inv_freq, the halves repeated), and the ±1 matrix
 * for rotate_half(x) = [−x₂, x₁].
 */
function ropeTables(c: ModelConfig) {
  const hd = c.headDim;
  const half = hd / 2;
  const f = Math.fround;
  const inverse = Array.from({ length: half }, (_, i) => f(1 / f(c.ropeTheta ** f((2 * i) / hd))));
  const cos = new Float32Array(c.maxPositions * hd);
  const sin = new Float32Array(c.maxPositions * hd);
  for (let pos = 0; pos < c.maxPositions; pos++) {
    for (let i = 0; i < half; i++) {
      const angle = f(pos * (inverse[i] as number));
      cos[pos * hd + i] = cos[pos * hd + i + half] = Math.cos(angle);
      sin[pos * hd + i] = sin[pos * hd + i + half] = Math.sin(angle);
    }
  }
  const rotateHalf = new Float32Array(hd * hd);
  for (let j = 0; j < half; j++) {
    rotateHalf[(j + half) * hd + j] = -1;
    rotateHalf[j * hd + j + half] = 1;
  }
  return {
    cos: tf.tensor2d(cos, [c.maxPositions, hd]),
    sin: tf.tensor2d(sin, [c.maxPositions, hd]),
    rotateHalf: tf.tensor2d(rotateHalf, [hd, hd]),
  };
}

/** Float32 values of a stored tensor (F32, or the half-precision dtypes GPU trainers write). */
export function floatValues(t: Tensor): Float32Array {
  if (t.dtype === 'F32') return t.data as Float32Array;
  if (t.dtype === 'BF16' || t.dtype === 'F16') {
    const half = t.data as Uint16Array;
    const out = new Float32Array(half.length);
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < half.length; i++) {
      const h = half[i] as number;
      if (t.dtype === 'BF16') bits[i] = h << 16;
      else out[i] = halfToFloat(h);
    }
    return out;
  }
  throw new Error(`weights of dtype ${t.dtype} are not supported; store them as F32, F16 or BF16`);
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

/**
 * Draws a token from logits with temperature and nucleus (top-p) sampling; temperature 0 is
 * greedy. The log-prob returned is the model's own (log-softmax of the raw logits), as vLLM
 * reports by default and as the trainer computes it, so the first PPO ratio is exactly 1.
 */
export function sampleToken(logits: readonly number[], temperature: number, topP: number, u: number): { id: number; logprob: number } {
  const max = Math.max(...logits);
  const logZ = max + Math.log(logits.reduce((sum, l) => sum + Math.exp(l - max), 0));
  const pick = (id: number) => ({ id, logprob: (logits[id] as number) - logZ });
  if (temperature <= 0) {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if ((logits[i] as number) > (logits[best] as number)) best = i;
    return pick(best);
  }
  const weights = logits.map((l) => Math.exp((l - max) / temperature));
  const total = weights.reduce((a, b) => a + b, 0);
  let order = weights.map((w, id) => ({ id, p: w / total }));
  if (topP < 1) {
    order = order.sort((a, b) => b.p - a.p);
    let mass = 0;
    const kept = [];
    for (const entry of order) {
      kept.push(entry);
      mass += entry.p;
      if (mass >= topP) break;
    }
    order = kept.map((e) => ({ id: e.id, p: e.p / mass }));
  }
  let acc = 0;
  for (const { id, p } of order) {
    acc += p;
    if (u < acc) return pick(id);
  }
  return pick((order[order.length - 1] as { id: number }).id);
}

/**
 * a @ b whose gradient uses explicit transposes: the default gradient multiplies with transpose
 * flags, which the wasm backend runs ~8× slower. Works on 2-D and on batched 4-D operands.
 */
const matMul = tf.customGrad((...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
  const [x, y, save] = args as [tf.Tensor, tf.Tensor, tf.GradSaveFunc];
  save([x, y]);
  const swap = (t: tf.Tensor) => (t.rank === 2 ? t.transpose() : t.transpose([0, 1, 3, 2]));
  return {
    value: tf.matMul(x, y),
    gradFunc: (dy, saved) => {
      const [sx, sy] = saved as [tf.Tensor, tf.Tensor];
      return [tf.matMul(dy, swap(sy)), tf.matMul(swap(sx), dy)];
    },
  };
}) as <T extends tf.Tensor>(a: tf.Tensor, b: tf.Tensor) => T;

/** Qwen3's RMSNorm: x / sqrt(mean(x²) + ε) · weight, over the last axis. */
function rmsNorm(x: tf.Tensor, weight: tf.Tensor, eps: number): tf.Tensor {
  return x.mul(x.square().mean(-1, true).add(eps).rsqrt()).mul(weight);
}

