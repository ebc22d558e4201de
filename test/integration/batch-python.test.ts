import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeBatch } from '../../src/samples/batch-artifact.js';
import { buildBatch } from '../../src/samples/batch.js';
import type { MergeCall } from '../../src/samples/merge.js';
import { setupPython } from '../helpers/python.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-batch-python-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ids = (text: string) => [...text].map((c) => c.charCodeAt(0));
const call = (callId: string, prompt: string, completion: string): MergeCall => ({
  callId,
  policyVersion: 'v7',
  promptIds: ids(prompt),
  choices: [
    { completionIds: ids(completion), logprobs: ids(completion).map((_, i) => -0.125 * (i + 1)), finishReason: 'stop' },
  ],
});

describe('the batch artifact in Python', () => {
  it('is read by the `safetensors` library with the documented tensor names, dtypes and metadata', () => {
    const batch = buildBatch(
      [
        {
          rolloutId: 'a',
          groupId: 'g',
          reward: 1,
          failureClass: null,
          calls: [call('a1', 'U:q|A:', 'yes'), call('a2', 'U:q|A:yes|T:ok|A:', 'done')],
        },
        { rolloutId: 'b', groupId: 'g', reward: 0, failureClass: null, calls: [call('b1', 'U:q|A:', 'no')] },
      ],
      {
        estimator: 'dr_grpo',
        zeroVarianceGroups: 'drop',
        lossAggregation: 'token-mean',
        maxPromptTokens: 100,
        maxResponseTokens: 100,
        truncated: 'mask',
        excludedFailureClasses: [],
        incompleteGroups: 'keep',
      },
      { decode: (t) => String.fromCharCode(...t) },
    );
    const { bytes, contentHash } = encodeBatch(batch, { iteration: 4, policyVersion: 'v7', configHash: 'cfg' });
    const file = path.join(dir, 'batch.safetensors');
    writeFileSync(file, bytes);

    const script = `
import json, sys
from safetensors import safe_open
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
with safe_open(sys.argv[1], framework="numpy") as f:
    meta = f.metadata()
cu = t["cu_seqlens"].tolist()
print(json.dumps({
  "dtypes": {k: str(v.dtype) for k, v in t.items()},
  "meta": meta,
  "cu": cu,
  "first_ids": t["input_ids"][cu[0]:cu[1]].tolist(),
  "trained": int(t["loss_mask"].sum()),
  "weight_sum": float((t["loss_weights"] * t["loss_mask"]).sum()),
  "adv": [float(t["advantages"][cu[i]]) for i in range(len(cu) - 1)],
  "owner": t["sequence_rollout"].tolist(),
}))`;
    const out = JSON.parse(execFileSync(setupPython(), ['-c', script, file], { encoding: 'utf8' })) as Record<
      string,
      any
    >;
    expect(out.dtypes).toEqual({
      input_ids: 'int32',
      loss_mask: 'uint8',
      advantages: 'float32',
      old_logprobs: 'float32',
      loss_weights: 'float32',
      cu_seqlens: 'int32',
      sequence_rollout: 'int32',
      token_policy: 'int32',
    });
    expect(out.meta).toMatchObject({
      format: 'rein-batch/1',
      iteration: '4',
      policy_version: 'v7',
      content_hash: contentHash,
      rollouts: '["a","b"]',
    });
    expect(out.cu).toEqual([
      0,
      batch.sequences[0]!.ids.length,
      batch.sequences[0]!.ids.length + batch.sequences[1]!.ids.length,
    ]);
    expect(out.first_ids).toEqual(ids('U:q|A:yes|T:ok|A:done'));
    expect(out.trained).toBe(ids('yesdoneno').length);
    // token-mean: the weights of all trained tokens add up to 1.
    expect(out.weight_sum).toBeCloseTo(1, 6);
    expect(out.adv).toEqual([0.5, -0.5]);
    expect(out.owner).toEqual([0, 1]);
  });
});
