import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import { decodeSafetensors, encodeSafetensors, type Tensor } from '../samples/safetensors.js';
import { seededRandom } from '../random.js';

/**
 * The embedded policy: a small decoder-only transformer in tfjs (wasm backend, cpu fallback).
 * Shaped around the wasm backend's limits: tokens are embedded as one-hot × matrix (the gradient
 * of gather is missing there), attention uses explicit transposes of 4-D tensors rather than
 * matMul transpose flags or 5-D transposes (both very slow there).
 */
export interface ModelConfig {
  vocabSize: number;
  contextLength: number;
  dModel: number;
  nLayers: number;
  nHeads: number;
  dFF: number;
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

// Variables stay unnamed: tfjs names are global, and several policy versions live side by side.
type Weights = Record<string, tf.Variable>;

function weightShapes(c: ModelConfig): Record<string, number[]> {
  const shapes: Record<string, number[]> = {
    'embed.tokens': [c.vocabSize, c.dModel],
    'embed.positions': [c.contextLength, c.dModel],
    'final_norm.scale': [c.dModel],
    'final_norm.bias': [c.dModel],
    'head.weight': [c.dModel, c.vocabSize],
  };
  for (let l = 0; l < c.nLayers; l++) {
    Object.assign(shapes, {
      [`layers.${l}.norm1.scale`]: [c.dModel],
      [`layers.${l}.norm1.bias`]: [c.dModel],
      [`layers.${l}.attn.qkv`]: [c.dModel, 3 * c.dModel],
      [`layers.${l}.attn.out`]: [c.dModel, c.dModel],
      [`layers.${l}.norm2.scale`]: [c.dModel],
      [`layers.${l}.norm2.bias`]: [c.dModel],
      [`layers.${l}.mlp.up`]: [c.dModel, c.dFF],
      [`layers.${l}.mlp.down`]: [c.dFF, c.dModel],
    });
  }
  return shapes;
}

export class TinyDecoder {
  private constructor(
    readonly config: ModelConfig,
    readonly weights: Weights,
  ) {}

  /** Fresh weights, deterministic for a seed. */
  static init(config: ModelConfig, seed: number): TinyDecoder {
    const weights: Weights = {};
    let s = seed;
    for (const [name, shape] of Object.entries(weightShapes(config))) {
      const fanIn = shape[0] as number;
      const seedOfWeight = s++;
      weights[name] = tf.tidy(() =>
        tf.variable(
          name.endsWith('.scale')
            ? tf.ones(shape)
            : name.endsWith('.bias')
              ? tf.zeros(shape)
              : tf.randomNormal(shape, 0, name.startsWith('embed') ? 0.02 : 1 / Math.sqrt(fanIn), 'float32', seedOfWeight),
          true,
        ),
      );
    }
    return new TinyDecoder(config, weights);
  }

  /** Weights in safetensors, with the config in its metadata (as HF model directories keep config.json beside). */
  toSafetensors(): Buffer {
    const tensors: Record<string, Tensor> = {};
    for (const [name, variable] of Object.entries(this.weights)) {
      tensors[name] = { dtype: 'F32', shape: variable.shape, data: variable.dataSync() as Float32Array };
    }
    return encodeSafetensors(tensors, { format: 'rein-tiny-decoder/1' });
  }

  static fromSafetensors(config: ModelConfig, bytes: Buffer): TinyDecoder {
    const { tensors } = decodeSafetensors(bytes);
    const weights: Weights = {};
    for (const [name, shape] of Object.entries(weightShapes(config))) {
      const t = tensors[name];
      if (!t || t.shape.join('x') !== shape.join('x')) {
        throw new Error(`weights do not fit the config: ${name} is ${t ? t.shape.join('x') : 'missing'}, expected ${shape.join('x')}`);
      }
      weights[name] = tf.tidy(() => tf.variable(tf.tensor(t.data as Float32Array, shape), true));
    }
    return new TinyDecoder(config, weights);
  }

  dispose(): void {
    for (const v of Object.values(this.weights)) v.dispose();
  }

  /** Logits [B, T, V] for token ids [B][T] (all rows the same length, at most contextLength). */
  logits(ids: number[][]): tf.Tensor3D {
    const c = this.config;
    const w = this.weights;
    const B = ids.length;
    const T = ids[0]?.length ?? 0;
    if (T > c.contextLength) throw new Error(`sequence of ${T} tokens exceeds the context of ${c.contextLength}`);
    return tf.tidy(() => {
      const oneHot = tf.oneHot(tf.tensor2d(ids, [B, T], 'int32').reshape([B * T]), c.vocabSize);
      let x = matMul(oneHot, w['embed.tokens'] as tf.Variable).reshape([B, T, c.dModel]);
      x = tf.add(x, (w['embed.positions'] as tf.Variable).slice([0, 0], [T, c.dModel]));
      const mask = tf.linalg.bandPart(tf.ones([T, T]), -1, 0).sub(1).mul(1e9); // 0 on and below the diagonal
      const dHead = c.dModel / c.nHeads;
      for (let l = 0; l < c.nLayers; l++) {
        const p = `layers.${l}.`;
        const h = layerNorm(x, w[`${p}norm1.scale`] as tf.Variable, w[`${p}norm1.bias`] as tf.Variable);
        const qkv = matMul(h.reshape([B * T, c.dModel]), w[`${p}attn.qkv`] as tf.Variable).reshape([B, T, 3, c.nHeads * dHead]);
        const [q, k, v] = tf.split(qkv, 3, 2).map((part) => part.reshape([B, T, c.nHeads, dHead]).transpose([0, 2, 1, 3])) as [tf.Tensor4D, tf.Tensor4D, tf.Tensor4D];
        const scores = matMul(q, k.transpose([0, 1, 3, 2])).div(Math.sqrt(dHead)).add(mask);
        const attended = matMul(tf.softmax(scores), v).transpose([0, 2, 1, 3]).reshape([B * T, c.dModel]);
        x = x.add(matMul(attended, w[`${p}attn.out`] as tf.Variable).reshape([B, T, c.dModel]));
        const h2 = layerNorm(x, w[`${p}norm2.scale`] as tf.Variable, w[`${p}norm2.bias`] as tf.Variable).reshape([B * T, c.dModel]);
        const mlp = matMul(tf.relu(matMul(h2, w[`${p}mlp.up`] as tf.Variable)), w[`${p}mlp.down`] as tf.Variable);
        x = x.add(mlp.reshape([B, T, c.dModel]));
      }
      const out = layerNorm(x, w['final_norm.scale'] as tf.Variable, w['final_norm.bias'] as tf.Variable).reshape([B * T, c.dModel]);
      return matMul(out, w['head.weight'] as tf.Variable).reshape([B, T, c.vocabSize]) as tf.Tensor3D;
    });
  }

  /** Next-token logits for each context (right-padded into one batch; causal, so padding never leaks). */
  lastLogits(contexts: number[][]): number[][] {
    const c = this.config;
    const width = Math.max(...contexts.map((x) => x.length));
    const padded = contexts.map((x) => [...x, ...Array<number>(width - x.length).fill(0)]);
    return tf.tidy(() => {
      const flat = this.logits(padded).reshape([padded.length * width, c.vocabSize]);
      return tf.gather(flat, tf.tensor1d(contexts.map((x, row) => row * width + x.length - 1), 'int32')).arraySync() as number[][];
    });
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
    for (let step = 0; step < options.maxTokens; step++) {
      const active = results.map((r, i) => ({ r, i })).filter(({ r }) => !r.stopped);
      if (active.length === 0) break;
      const logits = this.lastLogits(active.map(({ r, i }) => [...(prompts[i] as number[]), ...r.ids].slice(-this.config.contextLength)));
      active.forEach(({ r }, row) => {
        const { id, logprob } = sampleToken(logits[row] as number[], options.temperature, options.topP ?? 1, random());
        r.ids.push(id);
        r.logprobs.push(logprob);
        if (options.stopIds.includes(id)) r.stopped = true;
      });
    }
    return results;
  }
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

function layerNorm(x: tf.Tensor, scale: tf.Tensor, bias: tf.Tensor): tf.Tensor {
  const { mean, variance } = tf.moments(x, -1, true);
  return x.sub(mean).div(variance.add(1e-5).sqrt()).mul(scale).add(bias);
}
