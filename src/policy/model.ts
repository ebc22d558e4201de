import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import { seededRandom } from '../random.js';
import type { Tensor } from '../samples/safetensors.js';
import { Decoder, type LayerCache } from './decoder.js';
import { ropeTables, validateConfig, weightSpecs, type ModelConfig, type WeightSpec } from './model-config.js';
import { sampleToken } from './sampling.js';
import { floatValues, matMul, rmsNorm } from './tensor-ops.js';

// What callers import from here, defined beside it.
export { Decoder } from './decoder.js';
export type { ModelConfig } from './model-config.js';
export { sampleToken } from './sampling.js';
export { floatValues } from './tensor-ops.js';

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

type Weights = Record<string, tf.Variable>;

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
          shape.length === 1
            ? tf.ones(stored)
            : tf.randomNormal(stored, 0, linear ? 1 / Math.sqrt(stored[0] as number) : 0.02, 'float32', seedOfWeight),
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
          throw new Error(
            `weights do not fit the config: ${name} is ${t ? t.shape.join('x') : 'missing'}, expected ${shape.join('x')}`,
          );
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
    return this.config.tieWordEmbeddings
      ? (this.w('model.embed_tokens.weight').transpose() as tf.Tensor2D)
      : (this.w('lm_head.weight') as tf.Tensor2D);
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
    const causal = tf.linalg
      .bandPart(tf.ones([T, T]), -1, 0)
      .sub(1)
      .mul(1e9);
    let x = this.embed(ids.flat(), B * T);
    const caches: LayerCache[] = [];
    for (let l = 0; l < c.numLayers; l++) {
      const p = `model.layers.${l}.`;
      const h = rmsNorm(x, this.w(`${p}input_layernorm.weight`), c.rmsNormEps);
      const q = this.rotate(
        this.headNorm(matMul(h, this.w(`${p}self_attn.q_proj.weight`)), `${p}self_attn.q_norm.weight`).reshape([
          B,
          T,
          nH,
          hd,
        ]),
        cos,
        sin,
      );
      const k = this.rotate(
        this.headNorm(matMul(h, this.w(`${p}self_attn.k_proj.weight`)), `${p}self_attn.k_norm.weight`).reshape([
          B,
          T,
          nKV,
          hd,
        ]),
        cos,
        sin,
      );
      const v = matMul(h, this.w(`${p}self_attn.v_proj.weight`)).reshape([B, T, nKV, hd]);
      // Query heads of one key/value group are adjacent (Hugging Face's repeat_kv order), so a
      // group's queries stack into one matrix against its keys.
      const grouped = q.transpose([0, 2, 1, 3]).reshape([B, nKV, rep * T, hd]);
      const keysT = k.transpose([0, 2, 3, 1]) as tf.Tensor4D;
      const values = v.transpose([0, 2, 1, 3]) as tf.Tensor4D;
      caches.push({ keysT, values });
      const scores = matMul(grouped, keysT)
        .mul(1 / Math.sqrt(hd))
        .reshape([B, nH, T, T])
        .add(causal);
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
    for (const id of ids)
      if (!(id >= 0 && id < c.vocabSize)) throw new Error(`token id ${id} is outside the vocabulary of ${c.vocabSize}`);
    return matMul(tf.oneHot(tf.tensor1d(ids, 'int32'), c.vocabSize), this.w('model.embed_tokens.weight')).reshape([
      n,
      c.hiddenSize,
    ]);
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

  /**
   * Starts incremental decoding: rows join with their prompts and advance a token at a time against cached keys and
   * values.
   */
  decoder(): Decoder {
    return new Decoder(this);
  }

  /** One decoding step for rows whose caches are aligned to the same last column (see Decoder). */
  stepWithCache(
    tokens: number[],
    positions: number[],
    caches: LayerCache[],
    padMask: tf.Tensor4D,
  ): { logits: tf.Tensor2D; caches: LayerCache[] } {
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
      const q = this.rotate(
        this.headNorm(matMul(h, this.w(`${p}self_attn.q_proj.weight`)), `${p}self_attn.q_norm.weight`).reshape([
          B,
          1,
          nH,
          hd,
        ]),
        cos,
        sin,
      );
      const k = this.rotate(
        this.headNorm(matMul(h, this.w(`${p}self_attn.k_proj.weight`)), `${p}self_attn.k_norm.weight`).reshape([
          B,
          1,
          nKV,
          hd,
        ]),
        cos,
        sin,
      );
      const v = matMul(h, this.w(`${p}self_attn.v_proj.weight`)).reshape([B, nKV, 1, hd]);
      const cache = caches[l] as LayerCache;
      const keysT = tf.concat([cache.keysT, k.reshape([B, nKV, hd, 1])], 3) as tf.Tensor4D;
      const values = tf.concat([cache.values, v], 2) as tf.Tensor4D;
      next.push({ keysT, values });
      const scores = matMul(q.reshape([B, nKV, rep, hd]), keysT)
        .mul(1 / Math.sqrt(hd))
        .add(padMask);
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
      lastLogits = tf
        .gather(
          flat,
          tf.tensor1d(
            prompts.map((p, row) => row * width + p.length - 1),
            'int32',
          ),
        )
        .arraySync() as number[][];
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
          if (
            r.stopped ||
            step === options.maxTokens - 1 ||
            prompts[key]!.length + r.ids.length >= this.config.maxPositions
          )
            decoder.remove([key]);
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
