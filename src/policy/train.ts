import * as tf from '@tensorflow/tfjs';
import type { DecodedBatch } from '../samples/batch-artifact.js';
import { MICRO_BATCH_BYTES, planMicroBatches, trainingPeakBytes, WASM_HEAP_BYTES } from './micro-batches.js';
import type { Qwen3Model } from './model.js';

/**
 * One PPO-clip update over a batch as the sample builder packed it: per trained token,
 * ℓ_t = −min(r_t·A_t, clip(r_t, 1−ε, 1+ε)·A_t) with r_t = exp(log π(t) − log π_old(t)), and the
 * batch loss Σ_t w_t·ℓ_t with the builder's weights, so the loss normalization is the builder's.
 */
export interface PpoOptions {
  clipEpsilon: number;
  /** Gradients are scaled down to this global norm. */
  maxGradNorm: number;
  /**
   * Estimated peak bytes of one micro-batch (default MICRO_BATCH_BYTES): the minibatch's rows are
   * split into micro-batches under it and their gradients summed, one optimizer step in all.
   */
  microBatchBytes?: number;
}

export interface StepMetrics {
  loss: number;
  clipFraction: number;
  approxKl: number;
  entropy: number;
  gradNorm: number;
  tokens: number;
}

type Sequence = DecodedBatch['sequences'][number];

/** Sums over the trained tokens of the micro-batches run so far: the step's metrics are these over `trained`. */
interface TokenSums {
  trained: number;
  clipped: number;
  kl: number;
  entropy: number;
}

export function ppoStep(
  model: Qwen3Model,
  optimizer: tf.Optimizer,
  sequences: readonly Sequence[],
  options: PpoOptions,
): StepMetrics {
  const rows = sequences.filter((s) => s.lossMask.some((m, i) => i > 0 && m === 1));
  const tokens = rows.reduce((n, s) => n + s.lossMask.slice(1).reduce((a, b) => a + b, 0), 0);
  if (rows.length === 0) return { loss: 0, clipFraction: 0, approxKl: 0, entropy: 0, gradNorm: 0, tokens: 0 };
  const width = Math.max(...rows.map((s) => s.ids.length)) - 1;
  if (width + 1 > model.config.maxPositions) {
    throw new Error(
      `a sequence of ${width + 1} tokens exceeds the model context of ${model.config.maxPositions}; lower samples.maxPromptTokens / maxResponseTokens`,
    );
  }
  const sums: TokenSums = { trained: 0, clipped: 0, kl: 0, entropy: 0 };
  const { loss, grads } = summedGradients(model, microBatches(model, rows, options.microBatchBytes), (part) =>
    ppoLoss(model, part, options.clipEpsilon, sums),
  );
  const gradNorm = applyClipped(optimizer, grads, options.maxGradNorm);
  const mean = (sum: number) => sum / sums.trained;
  return {
    loss,
    clipFraction: mean(sums.clipped),
    approxKl: mean(sums.kl),
    entropy: mean(sums.entropy),
    gradNorm,
    tokens,
  };
}

/**
 * Σ_t w_t·ℓ_t over one micro-batch's rows (right-padded to its longest, padding at zero weight), as
 * a function for variableGrads; adds the micro-batch's token sums to `sums` when it runs.
 */
function ppoLoss(model: Qwen3Model, part: readonly Sequence[], clipEpsilon: number, sums: TokenSums) {
  const { inputs, targetHot, column } = padded(model, part);
  const mask = column((s) => s.lossMask);
  const weights = column((s) => s.lossWeights).mul(mask);
  const advantages = column((s) => s.advantages);
  const oldLogprobs = column((s) => s.oldLogprobs);
  return () => {
    const logProbsAll = tf.logSoftmax(model.logits(inputs));
    const logProbs = logProbsAll.mul(targetHot).sum(-1);
    const ratio = tf.exp(logProbs.sub(oldLogprobs));
    const unclipped = ratio.mul(advantages);
    const clipped = tf.clipByValue(ratio, 1 - clipEpsilon, 1 + clipEpsilon).mul(advantages);
    const perToken = tf.minimum(unclipped, clipped).neg();
    tf.tidy(() => {
      const sum = (t: tf.Tensor) => t.mul(mask).sum().dataSync()[0] as number;
      sums.trained += mask.sum().dataSync()[0] as number;
      sums.clipped += sum(tf.notEqual(unclipped, clipped).cast('float32'));
      sums.kl += sum(ratio.sub(1).sub(logProbs.sub(oldLogprobs)));
      sums.entropy += sum(tf.exp(logProbsAll).mul(logProbsAll).sum(-1).neg());
    });
    return perToken.mul(weights).sum() as tf.Scalar;
  };
}

/**
 * One supervised step (the warm start): mean negative log-likelihood of the masked tokens.
 * Sequences are token ids with a loss mask; position t predicts token t + 1.
 */
export function sftStep(
  model: Qwen3Model,
  optimizer: tf.Optimizer,
  sequences: ReadonlyArray<{ ids: number[]; lossMask: number[] }>,
  maxGradNorm: number,
): { loss: number; tokens: number } {
  const tokens = sequences.reduce((n, s) => n + s.lossMask.slice(1).reduce((a, b) => a + b, 0), 0);
  // The mean over the whole minibatch's tokens is a sum of per-row terms, so micro-batches add up to it.
  const { loss, grads } = summedGradients(model, microBatches(model, sequences), (part) => {
    const { inputs, targetHot, column } = padded(model, part);
    const mask = column((s) => s.lossMask);
    return () => {
      const logProbs = tf.logSoftmax(model.logits(inputs)).mul(targetHot).sum(-1);
      return logProbs.mul(mask).sum().div(Math.max(tokens, 1)).neg() as tf.Scalar;
    };
  });
  applyClipped(optimizer, grads, maxGradNorm);
  return { loss, tokens };
}

/** The rows split under the micro-batch budget (see micro-batches.ts); refuses a row that cannot fit the wasm heap. */
function microBatches<S extends { ids: number[] }>(
  model: Qwen3Model,
  rows: readonly S[],
  budgetBytes = MICRO_BATCH_BYTES,
): S[][] {
  const peak = (n: number, width: number) => trainingPeakBytes(model.config, n, width);
  const widths = rows.map((s) => s.ids.length - 1);
  const widest = Math.max(...widths);
  if (tf.getBackend() === 'wasm' && peak(1, widest) > WASM_HEAP_BYTES) {
    throw new Error(
      `training one sequence of ${widest + 1} tokens on this model needs about ${(peak(1, widest) / 2 ** 30).toFixed(1)} GiB, more than the tfjs trainer's 4 GiB heap; lower samples.maxPromptTokens / maxResponseTokens, or train with trainer.engine: pytorch`,
    );
  }
  return planMicroBatches(widths, peak, budgetBytes).map((group) => group.map((i) => rows[i] as S));
}

/** A micro-batch's inputs and one-hot targets, and its per-position columns, right-padded to its longest row. */
function padded<S extends { ids: number[] }>(model: Qwen3Model, part: readonly S[]) {
  const width = Math.max(...part.map((s) => s.ids.length)) - 1;
  // Position t predicts token t + 1; right padding carries zero weight.
  const pad = (values: number[]) => [...values, ...Array<number>(width - values.length).fill(0)];
  const inputs = part.map((s) => pad(s.ids.slice(0, -1)));
  const targets = tf.tensor2d(
    part.map((s) => pad(s.ids.slice(1))),
    [part.length, width],
    'int32',
  );
  return {
    inputs,
    targetHot: tf.oneHot(targets, model.config.vocabSize),
    column: (pick: (s: S) => number[]) =>
      tf.tensor2d(
        part.map((s) => pad(pick(s).slice(1))),
        [part.length, width],
      ),
  };
}

/**
 * The loss and its gradients over all parts, each part's tape built and freed before the next: the
 * sum of the parts' values and gradients (the losses are sums over rows, so this is the gradient of
 * the whole). One part gives its gradients as they are.
 */
function summedGradients<P>(
  model: Qwen3Model,
  parts: readonly P[],
  lossOf: (part: P) => () => tf.Scalar,
): { loss: number; grads: tf.NamedTensorMap } {
  let loss = 0;
  let total: tf.NamedTensorMap | undefined;
  for (const part of parts) {
    const { value, grads } = tf.tidy(() => tf.variableGrads(lossOf(part), Object.values(model.weights)));
    loss += value.dataSync()[0] as number;
    value.dispose();
    if (total === undefined) {
      total = grads;
      continue;
    }
    const previous = total;
    total = tf.tidy(() => Object.fromEntries(Object.entries(previous).map(([name, g]) => [name, g.add(grads[name]!)])));
    tf.dispose([...Object.values(previous), ...Object.values(grads)]);
  }
  return { loss, grads: total ?? {} };
}

/** Scales gradients down to maxGradNorm (global norm), applies them, frees them; returns the norm before scaling. */
function applyClipped(optimizer: tf.Optimizer, grads: tf.NamedTensorMap, maxGradNorm: number): number {
  const norm = tf.tidy(() =>
    Math.sqrt(Object.values(grads).reduce((sum, g) => sum + (g.square().sum().dataSync()[0] as number), 0)),
  );
  const scale = norm > maxGradNorm ? maxGradNorm / norm : 1;
  const scaled = tf.tidy(() => Object.fromEntries(Object.entries(grads).map(([name, g]) => [name, g.mul(scale)])));
  optimizer.applyGradients(scaled);
  tf.dispose([...Object.values(grads), ...Object.values(scaled)]);
  return norm;
}
