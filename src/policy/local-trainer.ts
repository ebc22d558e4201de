import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { type decodeBatch } from '../samples/batch-artifact.js';
import type { ImportanceSampling } from '../samples/importance-sampling.js';
import { importanceWeights, type ImportanceReport } from '../samples/importance-weights.js';
import {
  encodeTokenLogprobs,
  logprobAgreement,
  TOKEN_LOGPROBS_FILE,
  type LogprobAgreement,
} from '../samples/token-logprobs.js';
import { checkBatchFits, loadTrainable, readBatch } from './trainer-input.js';
import { saveCheckpoint, type Checkpoint } from './checkpoint.js';
import { readyBackend, type Qwen3Model } from './model.js';
import { seededRandom } from '../random.js';
import { ppoStep, type StepMetrics } from './train.js';

/**
 * The local trainer for the embedded default: reads the packed batch and the current policy,
 * writes a new policy checkpoint and its metrics. Idempotent: an output directory that already
 * holds the result of this batch on this parent is returned as it is, never trained twice.
 */
export interface TrainJob {
  checkpointDir: string;
  batchPath: string;
  outputDir: string;
  seed: number;
  learningRate: number;
  epochs: number;
  /** Sequences per optimizer step. */
  minibatchSize: number;
  clipEpsilon: number;
  maxGradNorm: number;
  /** Minibatch order shuffled each epoch (seeded); off: the batch's order. */
  shuffle?: boolean;
}

export interface TrainResult {
  parent: string;
  /** What the output folder holds (older trainers did not say: full). */
  format?: 'full' | 'lora';
  /** The full model the output applies to, for an adapter; the lineage's root otherwise. */
  base?: string;
  batchContentHash: string;
  steps: number;
  skippedMinibatches: number;
  seconds: number;
  /** Means over the steps taken. */
  metrics: StepMetrics;
  /** Each step's own metrics, in the order taken (absent from results of trainers that predate it). */
  stepMetrics?: Array<StepMetrics & { epoch: number }>;
  /**
   * The parent's log-probs as the trainer computes them against the behaviour ones the batch carries (the values are
   * in the output folder's TOKEN_LOGPROBS_FILE); absent from results of trainers that predate it.
   */
  trainerLogprobs?: LogprobAgreement;
  reused: boolean;
  /** With a correction in the batch: how far the sampler was from the parent, what was capped and masked. */
  importanceWeights?: ImportanceReport;
  /**
   * Where the output was stored when not the output folder itself (an s3:// artifact store): what the registry
   * records.
   */
  checkpointUri?: string;
}

export async function runTrainJob(job: TrainJob): Promise<TrainResult> {
  const release = await lockOutput(job.outputDir);
  try {
    return await trainOnce(job);
  } finally {
    release();
  }
}

/**
 * One trainer per output directory: a second one (a retried activity whose first trainer is
 * still running after its worker died) waits for the first, then finds its result.
 */
async function lockOutput(outputDir: string): Promise<() => void> {
  const lock = `${path.resolve(outputDir)}.lock`;
  mkdirSync(path.dirname(lock), { recursive: true });
  for (;;) {
    try {
      writeFileSync(lock, String(process.pid), { flag: 'wx' });
      return () => rmSync(lock, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = Number(readFileSync(lock, 'utf8'));
    if (isAlive(holder)) await sleep(250);
    else rmSync(lock, { force: true }); // left by a trainer that died
  }
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function trainOnce(job: TrainJob): Promise<TrainResult> {
  const batch = readBatch(job.batchPath);
  const batchContentHash = batch.metadata.content_hash as string;
  const metricsFile = path.join(job.outputDir, 'metrics.json');
  const previous = previousResult(job, batchContentHash, metricsFile);
  if (previous) return previous;

  await readyBackend();
  const started = performance.now();
  const checkpoint = loadTrainable(job.checkpointDir);
  checkBatchFits(batch, checkpoint);
  // Adam as docs/training-objective.md and PyTorch have it (tfjs's default epsilon is 1e-7).
  const optimizer = tf.train.adam(job.learningRate, 0.9, 0.999, 1e-8);
  const parentLogprobs = parentTokenLogprobs(checkpoint.model, batch.sequences);
  const correction =
    batch.importanceSampling && importanceCorrected(batch.sequences, parentLogprobs, batch.importanceSampling);
  const { totals, steps, skipped, stepMetrics } = runEpochs(
    job,
    checkpoint.model,
    optimizer,
    correction?.sequences ?? batch.sequences,
  );
  const mean = (x: number) => (steps === 0 ? 0 : x / steps);
  const parent = path.resolve(job.checkpointDir);
  const result: TrainResult = {
    parent,
    format: 'full',
    base: typeof checkpoint.info.base === 'string' ? checkpoint.info.base : parent,
    batchContentHash,
    steps,
    skippedMinibatches: skipped,
    seconds: (performance.now() - started) / 1000,
    metrics: {
      loss: mean(totals.loss),
      clipFraction: mean(totals.clipFraction),
      approxKl: mean(totals.approxKl),
      entropy: mean(totals.entropy),
      gradNorm: mean(totals.gradNorm),
      tokens: totals.tokens,
    },
    stepMetrics,
    trainerLogprobs: logprobAgreement(batch.sequences.map((s, i) => ({ ...s, trainer: parentLogprobs[i] ?? [] }))),
    reused: false,
    ...(correction && { importanceWeights: correction.report }),
  };
  saveTrained(job, checkpoint, result, Number(batch.metadata.iteration));
  mkdirSync(path.dirname(path.join(job.outputDir, TOKEN_LOGPROBS_FILE)), { recursive: true });
  writeFileSync(
    path.join(job.outputDir, TOKEN_LOGPROBS_FILE),
    encodeTokenLogprobs(tokenLogprobsTensor(batch.sequences, parentLogprobs), batchContentHash),
  );
  writeFileSync(metricsFile, `${JSON.stringify(result, null, 2)}\n`);
  checkpoint.model.dispose();
  optimizer.dispose();
  return result;
}

/**
 * What an earlier run of this job left in its output directory: reused if it trained the same batch from the same
 * parent.
 */
function previousResult(job: TrainJob, batchContentHash: string, metricsFile: string): TrainResult | undefined {
  if (!existsSync(path.join(job.outputDir, 'config.json')) || !existsSync(metricsFile)) return undefined;
  const previous = JSON.parse(readFileSync(metricsFile, 'utf8')) as TrainResult;
  if (previous.batchContentHash === batchContentHash && previous.parent === path.resolve(job.checkpointDir))
    return { ...previous, reused: true };
  throw new Error(
    `${job.outputDir} already holds a checkpoint trained from another batch or parent; choose a new output directory`,
  );
}

/** The PPO epochs over the batch's sequences, minibatch by minibatch: summed step metrics, steps taken and skipped. */
function runEpochs(
  job: TrainJob,
  model: Qwen3Model,
  optimizer: tf.Optimizer,
  sequences: BatchSequence[],
): { totals: StepMetrics; steps: number; skipped: number; stepMetrics: Array<StepMetrics & { epoch: number }> } {
  const random = seededRandom(job.seed);
  const minibatches = Math.max(1, Math.ceil(sequences.length / job.minibatchSize));
  const totals: StepMetrics = { loss: 0, clipFraction: 0, approxKl: 0, entropy: 0, gradNorm: 0, tokens: 0 };
  const stepMetrics: Array<StepMetrics & { epoch: number }> = [];
  let skipped = 0;
  for (let epoch = 0; epoch < job.epochs; epoch++) {
    const indices = sequences.map((_, i) => i);
    const order = job.shuffle === false ? indices : shuffle(indices, random);
    for (let m = 0; m < minibatches; m++) {
      // Each minibatch carries its share of the batch weights; scaling keeps every step on the batch's loss scale.
      const part = order
        .slice(m * job.minibatchSize, (m + 1) * job.minibatchSize)
        .map((i) => sequences[i] as BatchSequence)
        .map((s) => ({ ...s, lossWeights: s.lossWeights.map((w) => w * minibatches) }));
      // A minibatch with no advantage signal only adds noise (and collapsed the policy in measurements).
      if (part.every((s) => s.advantages.every((a, t) => a === 0 || t === 0 || s.lossMask[t] === 0))) {
        skipped++;
        continue;
      }
      const step = ppoStep(model, optimizer, part, { clipEpsilon: job.clipEpsilon, maxGradNorm: job.maxGradNorm });
      for (const key of Object.keys(totals) as Array<keyof StepMetrics>) totals[key] += step[key];
      stepMetrics.push({ epoch, ...step });
    }
  }
  return { totals, steps: stepMetrics.length, skipped, stepMetrics };
}

/** Writes the trained checkpoint with what it was trained from and how, as the PyTorch trainer does. */
function saveTrained(job: TrainJob, checkpoint: Checkpoint, result: TrainResult, iteration: number): void {
  saveCheckpoint(
    job.outputDir,
    checkpoint.model,
    {
      format: 'full',
      parent: result.parent,
      base: result.base,
      batchContentHash: result.batchContentHash,
      iteration,
      trainer: {
        engine: 'tfjs',
        seed: job.seed,
        learningRate: job.learningRate,
        epochs: job.epochs,
        minibatchSize: job.minibatchSize,
        clipEpsilon: job.clipEpsilon,
        maxGradNorm: job.maxGradNorm,
        shuffle: job.shuffle !== false,
      },
    },
    { tokenizerFrom: checkpoint.tokenizerDir },
  );
}

type BatchSequence = ReturnType<typeof decodeBatch>['sequences'][number];

/** The parent's log-prob of each token of each sequence (0 on the first: nothing predicts it), before any step. */
function parentTokenLogprobs(model: Qwen3Model, sequences: readonly BatchSequence[]): number[][] {
  return sequences.map((s) =>
    tf.tidy(() => {
      const logProbs = tf.logSoftmax(model.logits([s.ids.slice(0, -1)])).arraySync()[0] as number[][];
      return s.ids.map((id, t) => (t === 0 ? 0 : (logProbs[t - 1]?.[id] as number)));
    }),
  );
}

/** The batch-aligned tensor of TOKEN_LOGPROBS_FILE: the parent's log-probs on trained tokens, 0 elsewhere. */
function tokenLogprobsTensor(sequences: readonly BatchSequence[], parent: readonly number[][]): Float32Array {
  const values = new Float32Array(sequences.reduce((n, s) => n + s.ids.length, 0));
  let at = 0;
  sequences.forEach((s, i) => {
    for (let t = 0; t < s.ids.length; t++, at++)
      if (t > 0 && s.lossMask[t] === 1) values[at] = (parent[i] as number[])[t] as number;
  });
  return values;
}

/**
 * Importance sampling for a sampler that is not exactly the parent (another engine, other kernels,
 * an older policy version): each trained token's weight times min(π_parent / π_sampler, cap), or 0
 * where the mask drops the token or its sequence (importance-weights.ts), from the parent's log-probs;
 * the PPO ratio is then taken against the parent's own log-probs, so clipping measures only what the
 * update changes.
 */
function importanceCorrected(
  sequences: readonly BatchSequence[],
  parent: readonly number[][],
  sampling: ImportanceSampling,
) {
  const { lossWeights, report } = importanceWeights(
    sequences.map((s, i) => ({ ...s, parentLogprobs: parent[i] as number[] })),
    sampling,
  );
  const corrected = sequences.map((s, i) => ({
    ...s,
    lossWeights: lossWeights[i] as number[],
    oldLogprobs: s.lossMask.map((m, t) =>
      m === 1 && t > 0 ? ((parent[i] as number[])[t] as number) : (s.oldLogprobs[t] as number),
    ),
  }));
  return { sequences: corrected, report };
}

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}
