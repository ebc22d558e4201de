import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { defaultModelConfig } from './checkpoint.js';
import { Qwen3Model, readyBackend, sampleToken } from './model.js';

const config = defaultModelConfig({
  vocabSize: 40,
  maxPositions: 16,
  hiddenSize: 16,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 4,
  intermediateSize: 32,
});
let backend: string;
beforeAll(async () => {
  backend = await readyBackend();
});

describe('Qwen3Model', () => {
  it('runs on the wasm backend', () => {
    expect(backend).toBe('wasm');
  });

  it("is causal: a position's logits do not depend on later tokens", () => {
    const model = Qwen3Model.init(config, 1);
    const a = model.logits([[1, 2, 3, 4, 5]]).arraySync()[0]!;
    const b = model.logits([[1, 2, 3, 9, 9]]).arraySync()[0]!;
    for (let i = 0; i < 3; i++) a[i]!.forEach((v, j) => expect(v).toBeCloseTo(b[i]![j]!, 5));
    expect(a[4]![0]).not.toBeCloseTo(b[4]![0]!, 5);
    model.dispose();
  });

  it('is deterministic for a seed, and round-trips its weights in Hugging Face layout', () => {
    const one = Qwen3Model.init(config, 7);
    const two = Qwen3Model.fromTensors(config, Qwen3Model.init(config, 7).toTensors());
    expect(one.logits([[3, 1, 4]]).arraySync()).toEqual(two.logits([[3, 1, 4]]).arraySync());
    expect(() => Qwen3Model.fromTensors({ ...config, hiddenSize: 32 }, one.toTensors())).toThrow(
      /do not fit the config/,
    );
    one.dispose();
    two.dispose();
  });

  it('samples reproducibly for a seed, reports log-probs, and stops at a stop token', () => {
    const before = tf.memory().numTensors;
    const model = Qwen3Model.init(config, 3);
    const options = { maxTokens: 8, temperature: 1, stopIds: [5], seed: 11 };
    const first = model.generate(
      [
        [1, 2],
        [3, 4, 6],
      ],
      options,
    );
    expect(
      model.generate(
        [
          [1, 2],
          [3, 4, 6],
        ],
        options,
      ),
    ).toEqual(first);
    for (const r of first) {
      expect(r.ids.length).toBe(r.logprobs.length);
      expect(r.logprobs.every((l) => l <= 0)).toBe(true);
      if (r.stopped) expect(r.ids.at(-1)).toBe(5);
      else expect(r.ids).toHaveLength(8);
    }
    // A row is generated the same alone as beside a longer one (padding does not leak).
    const alone = model.generate([[1, 2]], { ...options, temperature: 0 });
    const together = model.generate(
      [
        [1, 2],
        [3, 4, 6, 7, 8],
      ],
      { ...options, temperature: 0 },
    );
    expect(together[0]?.ids).toEqual(alone[0]?.ids);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('Decoder (key/value cache)', () => {
  const lastLogitsOf = (model: Qwen3Model, ids: number[]) =>
    tf.tidy(() => (model.logits([ids]).arraySync()[0] as number[][]).at(-1) as number[]);
  const close = (a: number[], b: number[]) => Math.max(...a.map((v, i) => Math.abs(v - (b[i] as number))));

  it('gives the logits of a whole-sequence pass, for rows that join and leave at different steps', () => {
    const before = tf.memory().numTensors;
    const model = Qwen3Model.init(config, 21);
    const decoder = model.decoder();
    const rows = new Map<number, number[]>([[1, [3, 1, 4]]]);
    let logits = decoder.add([{ key: 1, ids: [3, 1, 4] }]);
    for (let step = 0; step < 6; step++) {
      for (const [key, row] of logits)
        expect(close(row, lastLogitsOf(model, rows.get(key) as number[]))).toBeLessThan(1e-4);
      if (step === 2) {
        // A longer prompt joins (the cache widens on the left for the shorter row), and one leaves.
        rows.set(2, [5, 9, 2, 6, 5, 3, 5]);
        logits = new Map([...logits, ...decoder.add([{ key: 2, ids: rows.get(2) as number[] }])]);
      }
      if (step === 4) {
        decoder.remove([2]);
        rows.delete(2);
        logits.delete(2);
      }
      const next = [...logits.keys()].map((key) => ({ key, id: (step * 7 + key) % 40 }));
      for (const { key, id } of next) rows.get(key)?.push(id);
      logits = decoder.step(next);
    }
    expect(decoder.rows()).toEqual([1]);
    decoder.dispose();
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('refuses a step that would pass the context', () => {
    const model = Qwen3Model.init(config, 2);
    const decoder = model.decoder();
    decoder.add([{ key: 0, ids: Array.from({ length: 16 }, (_, i) => i) }]);
    expect(() => decoder.step([{ key: 0, id: 1 }])).toThrow(/context of 16/);
    expect(() => decoder.add([{ key: 1, ids: Array.from({ length: 17 }, () => 1) }])).toThrow(
      /exceeds the context of 16/,
    );
    decoder.dispose();
    model.dispose();
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

describe('Qwen3Model gradients', () => {
  it('match the default matMul gradients (the custom ones only change how transposes run)', () => {
    const model = Qwen3Model.init(config, 13);
    const ids = [[1, 2, 3, 4, 5, 6]];
    const loss = () => tf.logSoftmax(model.logits(ids)).mean() as tf.Scalar;
    const { grads } = tf.variableGrads(loss, Object.values(model.weights));
    // Numerical check of one entry each: embeddings, projections (custom matMul), a q/k norm.
    const byName = new Map(Object.entries(model.weights).map(([key, v]) => [v.name, { key, v }]));
    for (const [name, gradient] of Object.entries(grads)) {
      const { key, v: variable } = byName.get(name) as { key: string; v: tf.Variable };
      if (
        ![
          'model.embed_tokens.weight',
          'model.layers.0.self_attn.q_proj.weight',
          'model.layers.0.self_attn.k_norm.weight',
          'model.layers.0.mlp.down_proj.weight',
        ].includes(key)
      )
        continue;
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
