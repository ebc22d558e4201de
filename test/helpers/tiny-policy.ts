import { writeFileSync } from 'node:fs';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { defaultModelConfig, saveCheckpoint } from '../../src/policy/checkpoint.js';
import { readyBackend, Qwen3Model } from '../../src/policy/model.js';
import { encodeBatch } from '../../src/samples/batch-artifact.js';
import { buildBatch, type BatchOptions, type BatchRollout } from '../../src/samples/batch.js';

/** Two replies to one prompt: the rewarded one and the other. */
export const goodReply = [257, 104, 105, 258, 259, 121, 101, 115, 261];
export const badReply = [257, 104, 105, 258, 259, 110, 111, 261];

const options: BatchOptions = {
  estimator: 'dr_grpo',
  zeroVarianceGroups: 'drop',
  lossAggregation: 'token-mean',
  maxPromptTokens: 30,
  maxResponseTokens: 30,
  truncated: 'mask',
  excludedFailureClasses: [],
  incompleteGroups: 'keep',
};

/** Log-probs the model gives each token of `ids` after the first. */
export function logprobOf(model: Qwen3Model, ids: number[]): number[] {
  return tf.tidy(() => {
    const logits = tf.logSoftmax(model.logits([ids.slice(0, -1)])).arraySync()[0] as number[][];
    return ids.slice(1).map((id, t) => logits[t]![id]!);
  });
}

/** A rollout whose single call is the given sequence: prompt = first 5 tokens, completion = the rest. */
function rollout(model: Qwen3Model, id: string, ids: number[], reward: number, samplerShift: number): BatchRollout {
  const lp = logprobOf(model, ids).map((x) => x + samplerShift);
  return {
    rolloutId: id,
    groupId: 'task',
    reward,
    failureClass: null,
    calls: [
      {
        callId: `${id}-c`,
        policyVersion: 'base',
        promptIds: ids.slice(0, 5),
        choices: [{ completionIds: ids.slice(5), logprobs: lp.slice(4), finishReason: 'stop' }],
      },
    ],
  };
}

/**
 * A tiny policy checkpoint (`<dir>/base`) and training batches over it: `batch.safetensors`, and
 * for each requested sampler shift a batch whose sampler log-probs sit that far from the trainer's
 * (with an importance-weight cap of 2).
 */
export async function writeTinyPolicyAndBatch<K extends string>(
  dir: string,
  shifts: Record<K, number> = {} as Record<K, number>,
): Promise<{ base: string; batch: string; shifted: Record<K, string> }> {
  await readyBackend();
  const model = Qwen3Model.init(
    defaultModelConfig({
      maxPositions: 32,
      hiddenSize: 16,
      numHeads: 2,
      numKvHeads: 1,
      headDim: 8,
      intermediateSize: 32,
      numLayers: 1,
    }),
    1,
  );
  const base = path.join(dir, 'base');
  saveCheckpoint(base, model, { name: 'base' });
  const write = (file: string, shift: number, cap?: number) => {
    const batch = buildBatch(
      [rollout(model, 'good', goodReply, 1, shift), rollout(model, 'bad', badReply, 0, shift)],
      options,
      { decode: (t) => t.join(',') },
    );
    writeFileSync(
      file,
      encodeBatch(batch, {
        iteration: 1,
        policyVersion: 'base',
        configHash: 'c',
        ...(cap && { importanceWeightCap: cap }),
      }).bytes,
    );
    return file;
  };
  const batch = write(path.join(dir, 'batch.safetensors'), 0);
  const shifted = Object.fromEntries(
    Object.entries<number>(shifts).map(([name, shift]) => [
      name,
      write(path.join(dir, `${name}.safetensors`), shift, 2),
    ]),
  ) as Record<K, string>;
  model.dispose();
  return { base, batch, shifted };
}
