import * as tf from '@tensorflow/tfjs';

/** The shape of a Qwen3 decoder, as its Hugging Face config.json gives it (see checkpoint.ts). */
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

/** A weight as Hugging Face names and shapes it; `linear` ones are stored transposed here. */
export interface WeightSpec {
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
export function validateConfig(c: ModelConfig): void {
  const problems: string[] = [];
  if (c.numHeads % c.numKvHeads !== 0)
    problems.push(`num_attention_heads (${c.numHeads}) must be a multiple of num_key_value_heads (${c.numKvHeads})`);
  if (c.headDim % 2 !== 0) problems.push(`head_dim (${c.headDim}) must be even for rotary positions`);
  for (const [key, value] of Object.entries(c))
    if (typeof value === 'number' && !(value > 0)) problems.push(`${key} must be positive, got ${value}`);
  if (problems.length) throw new Error(`invalid model config: ${problems.join('; ')}`);
}

export /**
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
