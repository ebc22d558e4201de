import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { readyBackend, sampleToken, TinyDecoder, type ModelConfig } from './model.js';

const config: ModelConfig = { vocabSize: 40, contextLength: 16, dModel: 16, nLayers: 2, nHeads: 2, dFF: 32 };
let backend: string;
beforeAll(async () => {
  backend = await readyBackend();
});

describe('TinyDecoder', () => {
  it('runs on the wasm backend', () => {
    expect(backend).toBe('wasm');
  });

  it('is causal: a position\'s logits do not depend on later tokens', () => {
    const model = TinyDecoder.init(config, 1);
    const a = model.logits([[1, 2, 3, 4, 5]]).arraySync()[0]!;
    const b = model.logits([[1, 2, 3, 9, 9]]).arraySync()[0]!;
    for (let i = 0; i < 3; i++) a[i]!.forEach((v, j) => expect(v).toBeCloseTo(b[i]![j]!, 5));
    expect(a[4]![0]).not.toBeCloseTo(b[4]![0]!, 5);
    model.dispose();
  });

  it('is deterministic for a seed, and round-trips its weights through safetensors', () => {
    const one = TinyDecoder.init(config, 7);
    const two = TinyDecoder.fromSafetensors(config, TinyDecoder.init(config, 7).toSafetensors());
    expect(one.logits([[3, 1, 4]]).arraySync()).toEqual(two.logits([[3, 1, 4]]).arraySync());
    expect(() => TinyDecoder.fromSafetensors({ ...config, dModel: 32 }, one.toSafetensors())).toThrow(/do not fit the config/);
    one.dispose();
    two.dispose();
  });

  it('samples reproducibly for a seed, reports log-probs, and stops at a stop token', () => {
    const before = tf.memory().numTensors;
    const model = TinyDecoder.init(config, 3);
    const options = { maxTokens: 8, temperature: 1, stopIds: [5], seed: 11 };
    const first = model.generate([[1, 2], [3, 4, 6]], options);
    expect(model.generate([[1, 2], [3, 4, 6]], options)).toEqual(first);
    for (const r of first) {
      expect(r.ids.length).toBe(r.logprobs.length);
      expect(r.logprobs.every((l) => l <= 0)).toBe(true);
      if (r.stopped) expect(r.ids.at(-1)).toBe(5);
      else expect(r.ids).toHaveLength(8);
    }
    // A row is generated the same alone as beside a longer one (padding does not leak).
    const alone = model.generate([[1, 2]], { ...options, temperature: 0 });
    const together = model.generate([[1, 2], [3, 4, 6, 7, 8]], { ...options, temperature: 0 });
    expect(together[0]?.ids).toEqual(alone[0]?.ids);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('sampleToken', () => {
  const logits = [2, 1, 0, -1];
  const logZ = Math.log(logits.reduce((s, l) => s + Math.exp(l), 0));

  it('is greedy at temperature 0 and reports the model log-prob', () => {
    expect(sampleToken(logits, 0, 1, 0.99)).toEqual({ id: 0, logprob: 2 - logZ });
  });

  it('samples by cumulative probability, and top-p keeps only the nucleus', () => {
    expect(sampleToken(logits, 1, 1, 0.999).id).toBe(3);
    expect(sampleToken(logits, 1, 0.5, 0.999).id).toBe(0);
    expect(sampleToken(logits, 1, 0.8, 0.999)).toEqual({ id: 1, logprob: 1 - logZ });
  });
});

describe('TinyDecoder gradients', () => {
  it('match the default matMul gradients (the custom ones only change how transposes run)', () => {
    const model = TinyDecoder.init(config, 13);
    const ids = [[1, 2, 3, 4, 5, 6]];
    const loss = () => tf.logSoftmax(model.logits(ids)).mean() as tf.Scalar;
    const { grads } = tf.variableGrads(loss, Object.values(model.weights));
    // Numerical check on weights reached only through the custom matMul: nudge one entry each.
    const byName = new Map(Object.entries(model.weights).map(([key, v]) => [v.name, { key, v }]));
    for (const [name, gradient] of Object.entries(grads)) {
      const { key, v: variable } = byName.get(name) as { key: string; v: tf.Variable };
      if (!['embed.tokens', 'head.weight', 'layers.0.attn.qkv', 'layers.0.mlp.down'].includes(key)) continue;
      const grad = gradient.flatten().arraySync() as number[];
      const original = variable.flatten().arraySync() as number[];
      const at = original.length - 1;
      const bump = (delta: number) => {
        const values = [...original];
        values[at] = (values[at] as number) + delta;
        variable.assign(tf.tensor(values, variable.shape));
        return loss().dataSync()[0] as number;
      };
      const eps = 1e-2;
      const numeric = (bump(eps) - bump(-eps)) / (2 * eps);
      bump(0);
      expect(grad[at], key).toBeCloseTo(numeric, 3);
    }
    tf.dispose(Object.values(grads));
    model.dispose();
  });
});
