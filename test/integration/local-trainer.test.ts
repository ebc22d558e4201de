import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCheckpoint } from '../../src/policy/checkpoint.js';
import { runTrainJob } from '../../src/policy/local-trainer.js';
import { runRein } from '../helpers/cli.js';
import { badReply as bad, goodReply as good, logprobOf, writeTinyPolicyAndBatch } from '../helpers/tiny-policy.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-local-trainer-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let base: string;
let batchFile: string;
/** Batches whose sampler log-probs sit above / below the trainer's, with an importance-weight cap of 2. */
let shifted: Record<'above' | 'below', string>;
beforeAll(async () => {
  ({ base, batch: batchFile, shifted } = await writeTinyPolicyAndBatch(dir, { above: 1, below: -2 }));
});

const train = (out: string, extra: string[] = []) =>
  runRein([
    'policy',
    'train',
    '--checkpoint',
    base,
    '--batch',
    batchFile,
    '--out',
    out,
    '--lr',
    '0.01',
    '--epochs',
    '8',
    '--seed',
    '3',
    ...extra,
  ]);

describe('rein policy train (the local trainer, as a child process)', () => {
  it('writes a new checkpoint that prefers the rewarded reply, with its lineage and metrics', async () => {
    const out = path.join(dir, 'v1');
    const { code, stdout, stderr } = await train(out);
    expect(stderr).not.toContain('rein:');
    expect(code).toBe(0);
    const result = JSON.parse(stdout);
    expect(result).toMatchObject({ steps: 8, reused: false, parent: base, metrics: { tokens: expect.any(Number) } });
    expect(result.metrics.entropy).toBeGreaterThan(0);

    const before = loadCheckpoint(base);
    const after = loadCheckpoint(out);
    expect(after.info).toMatchObject({ parent: base, iteration: 1, batchContentHash: result.batchContentHash });
    const gain = (ids: number[]) =>
      logprobOf(after.model, ids)
        .slice(4)
        .reduce((a, b) => a + b, 0) -
      logprobOf(before.model, ids)
        .slice(4)
        .reduce((a, b) => a + b, 0);
    expect(gain(good)).toBeGreaterThan(0);
    expect(gain(bad)).toBeLessThan(0);
    before.model.dispose();
    after.model.dispose();
  });

  it('is deterministic for a seed, and never trains twice into the same output', async () => {
    const [a, b] = [path.join(dir, 'det-a'), path.join(dir, 'det-b')];
    await train(a);
    await train(b);
    expect(
      readFileSync(path.join(a, 'model.safetensors')).equals(readFileSync(path.join(b, 'model.safetensors'))),
    ).toBe(true);
    const again = await train(a);
    expect(JSON.parse(again.stdout)).toMatchObject({ reused: true });
    const otherParent = await runRein(['policy', 'train', '--checkpoint', a, '--batch', batchFile, '--out', b]);
    expect(otherParent.code).toBe(1);
    expect(otherParent.stderr).toContain('already holds a checkpoint trained from another batch or parent');
    // Two trainers at once on one output (a retried update while the first still runs): one trains, the other waits and
    // reuses.
    const c = path.join(dir, 'det-c');
    const job = {
      checkpointDir: base,
      batchPath: batchFile,
      outputDir: c,
      seed: 3,
      learningRate: 0.01,
      epochs: 8,
      minibatchSize: 32,
      clipEpsilon: 0.2,
      maxGradNorm: 1,
    };
    const both = await Promise.all([runTrainJob(job), runTrainJob(job)]);
    expect(both.map((r) => r.reused).sort()).toEqual([false, true]);
    expect(
      readFileSync(path.join(c, 'model.safetensors')).equals(readFileSync(path.join(a, 'model.safetensors'))),
    ).toBe(true);
  });

  it('corrects a sampler that disagrees with the trainer by truncated importance weights', async () => {
    const job = {
      checkpointDir: base,
      seed: 3,
      learningRate: 0.01,
      epochs: 1,
      minibatchSize: 32,
      clipEpsilon: 0.2,
      maxGradNorm: 1,
    };
    const above = await runTrainJob({ ...job, batchPath: shifted.above, outputDir: path.join(dir, 'is-above') });
    // The sampler thought its tokens e times likelier than the trainer does: each weighs 1/e.
    expect(above.importanceWeights?.mean).toBeCloseTo(Math.exp(-1), 4);
    expect(above.importanceWeights).toMatchObject({ cap: 2, cappedFraction: 0 });
    // PPO's ratio is taken against the trainer's own log-probs: the first step starts unclipped.
    expect(above.metrics.clipFraction).toBe(0);
    const below = await runTrainJob({ ...job, batchPath: shifted.below, outputDir: path.join(dir, 'is-below') });
    expect(below.importanceWeights).toMatchObject({ cap: 2, mean: 2, cappedFraction: 1 });
    const plain = await runTrainJob({ ...job, batchPath: batchFile, outputDir: path.join(dir, 'is-none') });
    expect(plain.importanceWeights).toBeUndefined();
  });
});
