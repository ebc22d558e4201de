import * as tf from '@tensorflow/tfjs';
import type { DecodedBatch } from '../samples/batch-artifact.js';
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
  // Position t predicts token t + 1; right padding carries zero weight.
  const pad = (values: number[]) => [...values, ...Array<number>(width - values.length).fill(0)];
  const inputs = rows.map((s) => pad(s.ids.slice(0, -1)));
  const targets = rows.map((s) => pad(s.ids.slice(1)));
  const column = (pick: (s: Sequence) => number[]) =>
    tf.tensor2d(
      rows.map((s) => pad(pick(s).slice(1))),
      [rows.length, width],
    );

  const stats = { clipped: 0, kl: 0, entropy: 0 };
  const { value, grads } = tf.tidy(() => {
    const mask = column((s) => s.lossMask);
    const weights = column((s) => s.lossWeights).mul(mask);
    const advantages = column((s) => s.advantages);
    const oldLogprobs = column((s) => s.oldLogprobs);
    const targetHot = tf.oneHot(tf.tensor2d(targets, [rows.length, width], 'int32'), model.config.vocabSize);
    return tf.variableGrads(() => {
      const logProbsAll = tf.logSoftmax(model.logits(inputs));
      const logProbs = logProbsAll.mul(targetHot).sum(-1);
      const ratio = tf.exp(logProbs.sub(oldLogprobs));
      const unclipped = ratio.mul(advantages);
      const clipped = tf.clipByValue(ratio, 1 - options.clipEpsilon, 1 + options.clipEpsilon).mul(advantages);
      const perToken = tf.minimum(unclipped, clipped).neg();
      tf.tidy(() => {
        const trained = mask.sum().dataSync()[0] as number;
        const isClipped = tf.notEqual(unclipped, clipped).cast('float32').mul(mask);
        stats.clipped = (isClipped.sum().dataSync()[0] as number) / trained;
        const logRatio = logProbs.sub(oldLogprobs);
        stats.kl = (ratio.sub(1).sub(logRatio).mul(mask).sum().dataSync()[0] as number) / trained;
        const entropy = tf.exp(logProbsAll).mul(logProbsAll).sum(-1).neg();
        stats.entropy = (entropy.mul(mask).sum().dataSync()[0] as number) / trained;
      });
      return perToken.mul(weights).sum() as tf.Scalar;
    }, Object.values(model.weights));
  });

  const gradNorm = applyClipped(optimizer, grads, options.maxGradNorm);
  const loss = value.dataSync()[0] as number;
  value.dispose();
  return { loss, clipFraction: stats.clipped, approxKl: stats.kl, entropy: stats.entropy, gradNorm, tokens };
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
  const width = Math.max(...sequences.map((s) => s.ids.length)) - 1;
  const pad = (values: number[]) => [...values, ...Array<number>(width - values.length).fill(0)];
  const inputs = sequences.map((s) => pad(s.ids.slice(0, -1)));
  const tokens = sequences.reduce((n, s) => n + s.lossMask.slice(1).reduce((a, b) => a + b, 0), 0);
  const { value, grads } = tf.tidy(() => {
    const mask = tf.tensor2d(
      sequences.map((s) => pad(s.lossMask.slice(1))),
      [sequences.length, width],
    );
    const targetHot = tf.oneHot(
      tf.tensor2d(
        sequences.map((s) => pad(s.ids.slice(1))),
        [sequences.length, width],
        'int32',
      ),
      model.config.vocabSize,
    );
    return tf.variableGrads(() => {
      const logProbs = tf.logSoftmax(model.logits(inputs)).mul(targetHot).sum(-1);
      return logProbs.mul(mask).sum().div(Math.max(tokens, 1)).neg() as tf.Scalar;
    }, Object.values(model.weights));
  });
  applyClipped(optimizer, grads, maxGradNorm);
  const loss = value.dataSync()[0] as number;
  value.dispose();
  return { loss, tokens };
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
