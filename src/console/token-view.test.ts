import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LocalArtifactStore } from '../artifacts/local-store.js';
import { encodeBatch } from '../samples/batch-artifact.js';
import type { Batch } from '../samples/batch.js';
import { encodeTokenLogprobs, TOKEN_LOGPROBS_FILE } from '../samples/token-logprobs.js';
import { rolloutTokens, TokenViewNotFoundError } from './token-view.js';

const span = (start: number, end: number) => ({
  start,
  end,
  callId: 'c',
  choice: 0,
  policyVersion: 'v0',
  finishReason: 'stop',
});

/** Two rollouts: r1 has two sequences, r2 one; token ids the embedded default's tokenizer knows. */
const batch = {
  report: {},
  sequences: [
    {
      rolloutId: 'r1',
      ids: [10, 11, 12],
      lossMask: [0, 1, 1],
      oldLogprobs: [0, -1, -2],
      spans: [span(1, 3)],
      advantage: 0.5,
      weight: 0.25,
    },
    {
      rolloutId: 'r2',
      ids: [13, 14],
      lossMask: [0, 1],
      oldLogprobs: [0, -3],
      spans: [span(1, 2)],
      advantage: -1,
      weight: 1,
    },
    {
      rolloutId: 'r1',
      ids: [15, 16, 17, 18],
      lossMask: [0, 0, 1, 0],
      oldLogprobs: [0, 0, -0.5, 0],
      spans: [span(2, 3)],
      advantage: 0.5,
      weight: 0.25,
    },
  ],
} as unknown as Batch;

async function stored(options: { trainerValues?: number[]; trainedOn?: string } = {}) {
  const root = mkdtempSync(path.join(tmpdir(), 'rein-tokens-'));
  const artifacts = new LocalArtifactStore(path.join(root, 'artifacts'));
  const { bytes, contentHash } = encodeBatch(batch, { iteration: 2, policyVersion: 'v0', configHash: 'c' });
  await artifacts.put(`runs/run-a/iterations/2/batch-${contentHash.slice(0, 16)}.safetensors`, bytes);
  const checkpoint = path.join(root, 'v1');
  mkdirSync(checkpoint);
  for (const name of ['tokenizer.json', 'tokenizer_config.json'])
    copyFileSync(path.join('models/base', name), path.join(checkpoint, name));
  mkdirSync(path.join(checkpoint, 'rein'));
  if (options.trainerValues)
    writeFileSync(
      path.join(checkpoint, TOKEN_LOGPROBS_FILE),
      encodeTokenLogprobs(Float32Array.from(options.trainerValues), options.trainedOn ?? contentHash),
    );
  const trained = { version: 'v1', checkpointUri: checkpoint, batchContentHash: contentHash };
  return { artifacts, trained };
}

describe("a rollout's tokens in an iteration's batch", () => {
  const ask = { runId: 'run-a', iteration: 2, rolloutId: 'r1' };

  it("lays out each of the rollout's sequences token by token, behaviour beside trainer log-probs", async () => {
    // Batch order: r1 (3 tokens), r2 (2), r1 (4): the trainer's values are aligned with all 9.
    const sources = await stored({ trainerValues: [0, -1.1, -2.2, 0, -3.3, 0, 0, -0.4, 0] });
    const view = await rolloutTokens(ask, sources);
    expect(view.trainedVersion).toBe('v1');
    expect(view.trainerLogprobsMissing).toBeNull();
    expect(view.sequences.map((s) => [s.index, s.tokensTotal, s.trainedTokens])).toEqual([
      [0, 3, 2],
      [2, 4, 1],
    ]);
    const [first, second] = view.sequences;
    expect(first!.tokens.map((t) => [t.id, t.trained, t.behaviourLogprob, t.trainerLogprob])).toEqual([
      [10, false, null, null],
      [11, true, -1, expect.closeTo(-1.1, 5)],
      [12, true, -2, expect.closeTo(-2.2, 5)],
    ]);
    expect(first!.tokens[1]).toMatchObject({ weight: 0.25, advantage: 0.5, policyVersion: 'v0' });
    expect(first!.tokens[0]!.weight).toBe(0);
    expect(second!.tokens[2]).toMatchObject({ id: 17, trained: true, behaviourLogprob: -0.5 });
    expect(second!.tokens[2]!.trainerLogprob).toBeCloseTo(-0.4, 5);
    // Decoded with the trained checkpoint's tokenizer, one token at a time.
    expect(first!.tokens.every((t) => typeof t.text === 'string' && t.text.length > 0)).toBe(true);
  });

  it('says why the trainer log-probs are missing instead of showing zeros', async () => {
    const unrecorded = await rolloutTokens(ask, await stored());
    expect(unrecorded.trainerLogprobsMissing).toMatch(/did not record them/);
    expect(unrecorded.sequences[0]!.tokens.every((t) => t.trainerLogprob === null)).toBe(true);

    const other = await rolloutTokens(ask, await stored({ trainerValues: Array(9).fill(-1), trainedOn: 'another' }));
    expect(other.trainerLogprobsMissing).toMatch(/another batch/);

    const { artifacts } = await stored({ trainerValues: Array(9).fill(-1) });
    const before = await rolloutTokens(ask, { artifacts, trained: undefined });
    expect(before.trainerLogprobsMissing).toMatch(/not registered a version yet/);
    expect(before.sequences[0]!.tokens[0]!.text).toBeNull();
  });

  it('names what is not there: a rollout outside the batch, an iteration without one', async () => {
    const sources = await stored();
    await expect(rolloutTokens({ ...ask, rolloutId: 'r9' }, sources)).rejects.toThrow(TokenViewNotFoundError);
    await expect(rolloutTokens({ ...ask, rolloutId: 'r9' }, sources)).rejects.toThrow(/batch report says why/);
    await expect(rolloutTokens({ ...ask, iteration: 3 }, sources)).rejects.toThrow(/no batch for iteration 3/);
  });
});
