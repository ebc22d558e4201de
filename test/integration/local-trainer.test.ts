import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultModelConfig, loadCheckpoint, saveCheckpoint } from '../../src/policy/checkpoint.js';
import { readyBackend, TinyDecoder } from '../../src/policy/model.js';
import { buildBatch, encodeBatch, type BatchRollout } from '../../src/samples/batch.js';
import { runRein } from '../helpers/cli.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-local-trainer-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const base = path.join(dir, 'base');
const good = [257, 104, 105, 258, 259, 121, 101, 115, 261];
const bad = [257, 104, 105, 258, 259, 110, 111, 261];

function logprobOf(model: TinyDecoder, ids: number[]): number[] {
  return tf.tidy(() => {
    const logits = tf.logSoftmax(model.logits([ids.slice(0, -1)])).arraySync()[0] as number[][];
    return ids.slice(1).map((id, t) => logits[t]![id]!);
  });
}

/** A rollout whose single call is the given sequence: prompt = first 5 tokens, completion = the rest. */
function rollout(model: TinyDecoder, id: string, ids: number[], reward: number): BatchRollout {
  const lp = logprobOf(model, ids);
  return {
    rolloutId: id,
    groupId: 'task',
    reward,
    failureClass: null,
    calls: [{ callId: `${id}-c`, policyVersion: 'base', promptIds: ids.slice(0, 5), choices: [{ completionIds: ids.slice(5), logprobs: lp.slice(4), finishReason: 'stop' }] }],
  };
}

let batchFile: string;
beforeAll(async () => {
  await readyBackend();
  const model = TinyDecoder.init(defaultModelConfig({ contextLength: 32, dModel: 16, nHeads: 2, dFF: 32, nLayers: 1 }), 1);
  saveCheckpoint(base, model, { name: 'base' });
  const batch = buildBatch(
    [rollout(model, 'good', good, 1), rollout(model, 'bad', bad, 0)],
    { estimator: 'dr_grpo', zeroVarianceGroups: 'drop', lossAggregation: 'token-mean', maxPromptTokens: 30, maxResponseTokens: 30, truncated: 'mask', excludedFailureClasses: [], incompleteGroups: 'keep' },
    { decode: (t) => t.join(',') },
  );
  batchFile = path.join(dir, 'batch.safetensors');
  writeFileSync(batchFile, encodeBatch(batch, { iteration: 1, policyVersion: 'base', configHash: 'c' }).bytes);
  model.dispose();
});

const train = (out: string, extra: string[] = []) =>
  runRein(['policy', 'train', '--checkpoint', base, '--batch', batchFile, '--out', out, '--lr', '0.01', '--epochs', '8', '--seed', '3', ...extra]);

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
    const gain = (ids: number[]) => logprobOf(after.model, ids).slice(4).reduce((a, b) => a + b, 0) - logprobOf(before.model, ids).slice(4).reduce((a, b) => a + b, 0);
    expect(gain(good)).toBeGreaterThan(0);
    expect(gain(bad)).toBeLessThan(0);
    before.model.dispose();
    after.model.dispose();
  });

  it('is deterministic for a seed, and never trains twice into the same output', async () => {
    const [a, b] = [path.join(dir, 'det-a'), path.join(dir, 'det-b')];
    await train(a);
    await train(b);
    expect(readFileSync(path.join(a, 'model.safetensors')).equals(readFileSync(path.join(b, 'model.safetensors')))).toBe(true);
    const again = await train(a);
    expect(JSON.parse(again.stdout)).toMatchObject({ reused: true });
    const otherParent = await runRein(['policy', 'train', '--checkpoint', a, '--batch', batchFile, '--out', b]);
    expect(otherParent.code).toBe(1);
    expect(otherParent.stderr).toContain('already holds a checkpoint trained from another batch or parent');
  });
});
