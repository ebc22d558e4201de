import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { defaultModelConfig } from './checkpoint.js';
import { Qwen3Model, readyBackend } from './model.js';
import { ppoStep } from './train.js';

const config = defaultModelConfig({
  vocabSize: 20,
  maxPositions: 16,
  hiddenSize: 16,
  numLayers: 1,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 8,
  intermediateSize: 32,
});
beforeAll(() => readyBackend());

/** Log-probs the model gives each token of a sequence (0 for the first, which nothing predicts). */
function tokenLogprobs(model: Qwen3Model, ids: number[]): number[] {
  return tf.tidy(() => {
    const logits = tf.logSoftmax(model.logits([ids.slice(0, -1)])).arraySync()[0] as number[][];
    return [0, ...ids.slice(1).map((id, t) => logits[t]![id]!)];
  });
}

function sequence(
  model: Qwen3Model,
  rolloutId: string,
  ids: number[],
  trained: number[],
  advantage: number,
  weight: number,
) {
  const lossMask = ids.map((_, i) => (trained.includes(i) ? 1 : 0));
  const current = tokenLogprobs(model, ids);
  return {
    rolloutId,
    ids,
    lossMask,
    advantages: ids.map(() => advantage),
    oldLogprobs: current.map((l, i) => (lossMask[i] ? l : 0)),
    lossWeights: lossMask.map((m) => m * weight),
    policyVersions: lossMask.map((m) => (m ? 'v1' : null)),
  };
}

describe('ppoStep', () => {
  it('raises the likelihood of positive-advantage tokens and lowers the negative ones', () => {
    const model = Qwen3Model.init(config, 5);
    const optimizer = tf.train.adam(0.01);
    const good = [1, 2, 3, 4, 5, 6];
    const bad = [1, 2, 3, 7, 8, 9];
    const batch = [sequence(model, 'a', good, [3, 4, 5], 1, 1 / 6), sequence(model, 'b', bad, [3, 4, 5], -1, 1 / 6)];
    const before = { good: tokenLogprobs(model, good), bad: tokenLogprobs(model, bad) };

    const first = ppoStep(model, optimizer, batch, { clipEpsilon: 0.2, maxGradNorm: 1 });
    expect(first).toMatchObject({ tokens: 6, clipFraction: 0 });
    expect(first.approxKl).toBeCloseTo(0, 6);
    expect(first.entropy).toBeGreaterThan(0);
    expect(first.gradNorm).toBeGreaterThan(0);
    for (let i = 0; i < 9; i++) ppoStep(model, optimizer, batch, { clipEpsilon: 0.2, maxGradNorm: 1 });

    const after = { good: tokenLogprobs(model, good), bad: tokenLogprobs(model, bad) };
    const sum = (xs: number[]) => xs.slice(3).reduce((a, b) => a + b, 0);
    expect(sum(after.good)).toBeGreaterThan(sum(before.good));
    expect(sum(after.bad)).toBeLessThan(sum(before.bad));
    model.dispose();
    optimizer.dispose();
  });

  it('is deterministic: the same batch from the same weights gives the same update', () => {
    const run = () => {
      const model = Qwen3Model.init(config, 9);
      const optimizer = tf.train.adam(0.01);
      const metrics = ppoStep(model, optimizer, [sequence(model, 'a', [1, 2, 3, 4], [2, 3], 0.5, 0.5)], {
        clipEpsilon: 0.2,
        maxGradNorm: 1,
      });
      const weights = model.toTensors();
      model.dispose();
      optimizer.dispose();
      return { metrics, weights };
    };
    const [a, b] = [run(), run()];
    expect(a.metrics).toEqual(b.metrics);
    expect(a.weights).toEqual(b.weights);
  });

  it('refuses a sequence longer than the model context, saying what to change', () => {
    const model = Qwen3Model.init(config, 1);
    const ids = Array.from({ length: 20 }, (_, i) => i % 10);
    const zeros = ids.map(() => 0);
    const long = {
      rolloutId: 'a',
      ids,
      lossMask: ids.map(() => 1),
      advantages: zeros,
      oldLogprobs: zeros,
      lossWeights: zeros,
      policyVersions: ids.map(() => 'v1'),
    };
    expect(() => ppoStep(model, tf.train.adam(0.01), [long], { clipEpsilon: 0.2, maxGradNorm: 1 })).toThrow(
      /exceeds the model context of 16; lower samples.maxPromptTokens/,
    );
    model.dispose();
  });
});
