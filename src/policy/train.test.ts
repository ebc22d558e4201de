import * as tf from '@tensorflow/tfjs';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { defaultModelConfig } from './checkpoint.js';
import { MICRO_BATCH_BYTES, planMicroBatches, trainingPeakBytes, WASM_HEAP_BYTES } from './micro-batches.js';
import { Qwen3Model, readyBackend } from './model.js';
import { ppoStep, type StepMetrics } from './train.js';

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

describe('ppoStep in micro-batches', () => {
  const row = fc.record({
    length: fc.integer({ min: 2, max: config.maxPositions }),
    tokens: fc.array(fc.integer({ min: 0, max: config.vocabSize - 1 }), {
      minLength: config.maxPositions,
      maxLength: config.maxPositions,
    }),
    trained: fc.array(fc.boolean(), { minLength: config.maxPositions, maxLength: config.maxPositions }),
    advantage: fc.double({ min: -2, max: 2, noNaN: true }),
    weight: fc.double({ min: 0.01, max: 1, noNaN: true }),
    drift: fc.double({ min: -0.5, max: 0.5, noNaN: true }),
  });

  /** A batch row whose old log-probs sit `drift` off the model's, so ratios move and some clip. */
  function batchRow(model: Qwen3Model, r: RowSpec, i: number) {
    const ids = r.tokens.slice(0, r.length);
    const lossMask = ids.map((_, t) => (t > 0 && (r.trained[t] || t === ids.length - 1) ? 1 : 0));
    const current = tokenLogprobs(model, ids);
    return {
      rolloutId: `r${i}`,
      ids,
      lossMask,
      advantages: ids.map((_, t) => r.advantage * (1 + t / 10)),
      oldLogprobs: current.map((l, t) => (lossMask[t] ? l + r.drift : 0)),
      lossWeights: lossMask.map((m) => m * r.weight),
      policyVersions: lossMask.map((m) => (m ? 'v1' : null)),
    };
  }

  /**
   * Weights after one step from `seed`'s fresh model. Plain SGD: the weights move by the clipped gradient itself, where
   * Adam's first step (g / |g|) would blow float rounding in near-zero gradients up to whole steps.
   */
  function oneStep(seed: number, rows: RowSpec[], maxGradNorm: number, microBatchBytes: number) {
    const model = Qwen3Model.init(config, seed);
    const optimizer = tf.train.sgd(0.5);
    const batch = rows.map((r, i) => batchRow(model, r, i));
    const metrics = ppoStep(model, optimizer, batch, { clipEpsilon: 0.2, maxGradNorm, microBatchBytes });
    const weights = model.toTensors();
    model.dispose();
    optimizer.dispose();
    return { metrics, weights };
  }

  it('gives the update and metrics of the whole minibatch in one pass', () => {
    fc.assert(
      fc.property(
        // Not 0: tfjs takes a seed of 0 as none, so Qwen3Model.init(config, 0) draws its first weight at random and the
        // two models compared would start apart (the CI failure this shrank to had seed 0).
        fc.integer({ min: 1, max: 1000 }),
        fc.array(row, { minLength: 2, maxLength: 6 }),
        fc.integer({ min: 1, max: 5 }),
        fc.constantFrom(0.05, 100),
        (seed, rows, rowsPerPart, maxGradNorm) => {
          const whole = oneStep(seed, rows, maxGradNorm, Infinity);
          const budget = trainingPeakBytes(config, rowsPerPart, config.maxPositions - 1);
          const split = oneStep(seed, rows, maxGradNorm, budget);
          for (const key of ['loss', 'clipFraction', 'approxKl', 'entropy', 'gradNorm'] as Array<keyof StepMetrics>)
            expect(split.metrics[key]).toBeCloseTo(whole.metrics[key], 4);
          expect(split.metrics.tokens).toBe(whole.metrics.tokens);
          for (const [name, tensor] of Object.entries(whole.weights)) {
            const other = split.weights[name]!.data as Float32Array;
            (tensor.data as Float32Array).forEach((w, i) =>
              expect(Math.abs((other[i] as number) - w)).toBeLessThan(1e-5),
            );
          }
        },
      ),
      { numRuns: 15 },
    );
  });

  it('plans every row once, longest first, each micro-batch within the budget unless a row alone exceeds it', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 1023 }), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 12 }),
        (widths, rowsAtFullWidth) => {
          const peak = (n: number, width: number) => trainingPeakBytes(config, n, width);
          const budget = peak(rowsAtFullWidth, 1023) / 2;
          const groups = planMicroBatches(widths, peak, budget);
          expect(groups.flat().sort((a, b) => a - b)).toEqual(widths.map((_, i) => i));
          for (const group of groups) {
            const width = Math.max(...group.map((i) => widths[i]!));
            expect(widths[group[0]!]).toBe(width);
            if (group.length > 1) expect(peak(group.length, width)).toBeLessThanOrEqual(budget);
          }
        },
      ),
    );
  });
});

describe('ppoStep on the batch that ran the wasm heap out', () => {
  // The files example's iteration-2 batch: 20 sequences, 14,581 tokens, all under the 1024-token context.
  const lengths = [522, 576, 625, 632, 632, 648, 657, 674, 680, 739, 746, 757, 758, 770, 812, 848, 852, 854, 897, 902];
  const filesPolicy = defaultModelConfig({
    vocabSize: 264,
    maxPositions: 1024,
    hiddenSize: 64,
    intermediateSize: 256,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 16,
  });

  it("plans it for the files example's policy in micro-batches that fit, where one pass cannot", () => {
    const peak = (n: number, width: number) => trainingPeakBytes(filesPolicy, n, width);
    expect(peak(lengths.length, 901)).toBeGreaterThan(WASM_HEAP_BYTES);
    const groups = planMicroBatches(
      lengths.map((n) => n - 1),
      peak,
      MICRO_BATCH_BYTES,
    );
    for (const group of groups)
      expect(peak(group.length, Math.max(...group.map((i) => lengths[i]! - 1)))).toBeLessThanOrEqual(MICRO_BATCH_BYTES);
  });

  it('trains its shape on a narrower model with the peak held under the micro-batch budget', async () => {
    // Attention memory grows with heads × width² per row; two one-dimensional heads keep the test quick.
    const narrow = defaultModelConfig({
      vocabSize: 16,
      maxPositions: 1024,
      hiddenSize: 4,
      intermediateSize: 4,
      numLayers: 1,
      numHeads: 2,
      numKvHeads: 1,
      headDim: 2,
    });
    const model = Qwen3Model.init(narrow, 3);
    const optimizer = tf.train.adam(0.001);
    const batch = lengths.map((n, i) => {
      const ids = Array.from({ length: n }, (_, t) => (t * 7 + i) % 16);
      const lossMask = ids.map((_, t) => (t > n / 3 ? 1 : 0));
      const zeros = ids.map(() => 0);
      return {
        rolloutId: `r${i}`,
        ids,
        lossMask,
        advantages: ids.map(() => (i % 2 ? 1 : -1)),
        oldLogprobs: zeros.map(() => Math.log(1 / 16)),
        lossWeights: lossMask.map((m) => m / 10_000),
        policyVersions: ids.map(() => 'v1'),
      };
    });
    expect(trainingPeakBytes(narrow, lengths.length, 901)).toBeGreaterThan(MICRO_BATCH_BYTES);
    let metrics: StepMetrics | undefined;
    const profile = await tf.profile(() => {
      metrics = ppoStep(model, optimizer, batch, { clipEpsilon: 0.2, maxGradNorm: 1 });
    });
    expect(profile.peakBytes).toBeLessThanOrEqual(MICRO_BATCH_BYTES);
    expect(metrics).toMatchObject({ tokens: 9_709 });
    expect(metrics!.gradNorm).toBeGreaterThan(0);
    model.dispose();
    optimizer.dispose();
  });
});

type RowSpec = {
  length: number;
  tokens: number[];
  trained: boolean[];
  advantage: number;
  weight: number;
  drift: number;
};
