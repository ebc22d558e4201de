/**
 * The embedded policy's speed on this machine: sampling tokens/s (one row, and 32 rows batched)
 * and the time of one PPO step over 32 sequences, with the base checkpoint. The baseline, in the
 * same run, is single-row sampling: the batched figure is reported as a ratio to it.
 *
 *   npm run bench:policy
 */
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { loadCheckpoint } from '../src/policy/checkpoint.js';
import { readyBackend } from '../src/policy/model.js';
import { ppoStep } from '../src/policy/train.js';
import { demonstration } from '../src/policy/warm-start.js';

const backend = await readyBackend();
const base = loadCheckpoint(path.resolve(import.meta.dirname, '../models/base'));
const prompt = base.tokenizer.encode('<|user|>37 times 78?<|end|><|assistant|>');
const tokens = 32;

function sampling(rows: number): number {
  const options = { maxTokens: tokens, temperature: 1, stopIds: [], seed: 1 };
  base.model.generate([prompt], { ...options, maxTokens: 4 }); // warm-up
  const t0 = performance.now();
  base.model.generate(Array.from({ length: rows }, () => prompt), options);
  return (rows * tokens) / ((performance.now() - t0) / 1000);
}

const single = sampling(1);
const batched = sampling(32);

const demo = demonstration(base.tokenizer, { id: 'b', question: '37 times 78?', answer: 2886 });
const sequences = Array.from({ length: 32 }, (_, i) => ({
  rolloutId: `r${i}`,
  ids: demo.ids,
  lossMask: demo.lossMask,
  advantages: demo.ids.map(() => (i % 2 ? 1 : -1)),
  oldLogprobs: demo.ids.map(() => -1),
  lossWeights: demo.lossMask.map((m) => m / 32),
  policyVersions: demo.ids.map(() => 'base'),
}));
const optimizer = tf.train.adam(1e-4);
ppoStep(base.model, optimizer, sequences, { clipEpsilon: 0.2, maxGradNorm: 1 }); // warm-up
const steps = 5;
const t0 = performance.now();
for (let i = 0; i < steps; i++) ppoStep(base.model, optimizer, sequences, { clipEpsilon: 0.2, maxGradNorm: 1 });
const stepMs = (performance.now() - t0) / steps;

console.log(`Embedded policy (models/base: d ${base.config.dModel}, ${base.config.nLayers} layers, context ${base.config.contextLength}), backend ${backend}.\n`);
console.log('| measure | value | vs baseline |');
console.log('|---|---|---|');
console.log(`| sampling, 1 row (baseline) | ${single.toFixed(0)} tokens/s | 1.00 |`);
console.log(`| sampling, 32 rows batched | ${batched.toFixed(0)} tokens/s | ${(batched / single).toFixed(2)} |`);
console.log(`| PPO step, 32 sequences of ${demo.ids.length} tokens | ${stepMs.toFixed(0)} ms | — |`);
