import type { Batch } from './batch.js';
import {
  batchContentHash,
  importanceMetadata,
  importanceSamplingFromMetadata,
  type ImportanceSampling,
} from './importance-sampling.js';
import { decodeSafetensors, encodeSafetensors, tensorsHash, type Tensor } from './safetensors.js';

export interface BatchIdentity {
  iteration: number;
  policyVersion: string;
  configHash: string;
  /**
   * Cap for truncated importance weights the trainer applies (π_trainer / π_sampler ≤ cap), if any: a batch the
   * trainers read as `importanceSampling` {mode: truncate}, hashed on its tensors alone as before masking existed.
   */
  importanceWeightCap?: number;
  /** The off-policy correction (importance-sampling.ts); its keys enter the content hash. */
  importanceSampling?: ImportanceSampling;
  /** SHA-256 of the tokenizer.json the ids come from: a trainer refuses a checkpoint with another. */
  tokenizerSha256?: string;
}

/**
 * The batch artifact: packed variable-length sequences without padding, in safetensors.
 * Tensors (N tokens in all, S sequences):
 *   input_ids     I32 [N]   token ids, sequences back to back
 *   loss_mask     U8  [N]   1 where the token is trained
 *   advantages    F32 [N]   the rollout's advantage on each of its tokens
 *   old_logprobs  F32 [N]   the sampling policy's log-prob of each trained token, 0 elsewhere
 *   loss_weights  F32 [N]   w_t: minimise Σ_t w_t · ℓ_t (0 on untrained tokens)
 *   cu_seqlens    I32 [S+1] sequence s spans tokens cu_seqlens[s] .. cu_seqlens[s+1]
 *   sequence_rollout I32 [S] index of each sequence's rollout in metadata.rollouts
 *   token_policy  I32 [N]   index in metadata.policy_versions of the policy that sampled each
 *                           trained token, -1 on untrained tokens
 * Metadata (strings): format, iteration, policy_version, config_hash, content_hash (SHA-256 of
 * the tensors, and of the correction's keys when importance_sampling is set), rollouts and
 * policy_versions (JSON arrays), the correction (importance_sampling truncate|mask,
 * importance_level token|sequence, importance_weight_cap, importance_band_low/high; or a bare
 * importance_weight_cap), tokenizer_sha256 (SHA-256 of the tokenizer.json the ids come from, when
 * the stage knows it).
 */
export function encodeBatch(batch: Batch, identity: BatchIdentity): { bytes: Buffer; contentHash: string } {
  const n = batch.sequences.reduce((sum, s) => sum + s.ids.length, 0);
  const inputIds = new Int32Array(n);
  const lossMask = new Uint8Array(n);
  const advantages = new Float32Array(n);
  const oldLogprobs = new Float32Array(n);
  const lossWeights = new Float32Array(n);
  const cuSeqlens = new Int32Array(batch.sequences.length + 1);
  const rolloutIds: string[] = [];
  const rolloutIndex = new Map<string, number>();
  const sequenceRollout = new Int32Array(batch.sequences.length);
  const tokenPolicy = new Int32Array(n).fill(-1);
  const policyVersions: string[] = [];
  let at = 0;
  batch.sequences.forEach((s, i) => {
    for (const span of s.spans) {
      let index = policyVersions.indexOf(span.policyVersion);
      if (index < 0) index = policyVersions.push(span.policyVersion) - 1;
      for (let t = span.start; t < span.end; t++) if (s.lossMask[t]) tokenPolicy[at + t] = index;
    }
    for (let t = 0; t < s.ids.length; t++, at++) {
      inputIds[at] = s.ids[t] as number;
      lossMask[at] = s.lossMask[t] as number;
      advantages[at] = s.advantage;
      oldLogprobs[at] = s.oldLogprobs[t] as number;
      lossWeights[at] = s.lossMask[t] ? s.weight : 0;
    }
    cuSeqlens[i + 1] = at;
    if (!rolloutIndex.has(s.rolloutId)) {
      rolloutIndex.set(s.rolloutId, rolloutIds.length);
      rolloutIds.push(s.rolloutId);
    }
    sequenceRollout[i] = rolloutIndex.get(s.rolloutId) as number;
  });
  const tensors: Record<string, Tensor> = {
    input_ids: { dtype: 'I32', shape: [n], data: inputIds },
    loss_mask: { dtype: 'U8', shape: [n], data: lossMask },
    advantages: { dtype: 'F32', shape: [n], data: advantages },
    old_logprobs: { dtype: 'F32', shape: [n], data: oldLogprobs },
    loss_weights: { dtype: 'F32', shape: [n], data: lossWeights },
    cu_seqlens: { dtype: 'I32', shape: [cuSeqlens.length], data: cuSeqlens },
    sequence_rollout: { dtype: 'I32', shape: [sequenceRollout.length], data: sequenceRollout },
    token_policy: { dtype: 'I32', shape: [n], data: tokenPolicy },
  };
  if (identity.importanceWeightCap !== undefined && identity.importanceSampling !== undefined)
    throw new Error('a batch takes importanceWeightCap or importanceSampling, not both');
  const objective = {
    ...(identity.importanceWeightCap !== undefined && { importance_weight_cap: String(identity.importanceWeightCap) }),
    ...importanceMetadata(identity.importanceSampling),
  };
  const contentHash = batchContentHash(tensorsHash(tensors), objective);
  const bytes = encodeSafetensors(tensors, {
    format: 'rein-batch/1',
    iteration: String(identity.iteration),
    policy_version: identity.policyVersion,
    config_hash: identity.configHash,
    content_hash: contentHash,
    rollouts: JSON.stringify(rolloutIds),
    policy_versions: JSON.stringify(policyVersions),
    ...objective,
    ...(identity.tokenizerSha256 !== undefined && { tokenizer_sha256: identity.tokenizerSha256 }),
  });
  return { bytes, contentHash };
}

export interface DecodedBatch {
  metadata: Record<string, string>;
  /** The correction the batch asks for (validated), if any. */
  importanceSampling?: ImportanceSampling;
  rollouts: string[];
  sequences: Array<{
    rolloutId: string;
    ids: number[];
    lossMask: number[];
    advantages: number[];
    oldLogprobs: number[];
    lossWeights: number[];
    /** The policy version that sampled each trained token; null on untrained tokens. */
    policyVersions: Array<string | null>;
  }>;
}

/** Reads a batch artifact back (what Rein's own trainer does; a Python trainer uses `safetensors`). */
export function decodeBatch(bytes: Buffer): DecodedBatch {
  const { tensors, metadata } = decodeSafetensors(bytes);
  if (metadata.format !== 'rein-batch/1') throw new Error(`not a Rein batch (format ${metadata.format ?? 'missing'})`);
  const need = (name: string) => {
    const t = tensors[name];
    if (!t) throw new Error(`batch artifact lacks tensor ${name}`);
    return Array.from(t.data as ArrayLike<number>);
  };
  if (batchContentHash(tensorsHash(tensors), metadata) !== metadata.content_hash)
    throw new Error('batch artifact content hash does not match its tensors');
  const importanceSampling = importanceSamplingFromMetadata(metadata);
  const rollouts = JSON.parse(metadata.rollouts ?? '[]') as string[];
  const policies = JSON.parse(metadata.policy_versions ?? '[]') as string[];
  const [ids, mask, advantages, oldLogprobs, weights, cu, owner, tokenPolicy] = [
    need('input_ids'),
    need('loss_mask'),
    need('advantages'),
    need('old_logprobs'),
    need('loss_weights'),
    need('cu_seqlens'),
    need('sequence_rollout'),
    need('token_policy'),
  ];
  return {
    metadata,
    ...(importanceSampling && { importanceSampling }),
    rollouts,
    sequences: owner.map((r, i) => {
      const [start, end] = [cu[i] as number, cu[i + 1] as number];
      return {
        rolloutId: rollouts[r] as string,
        ids: ids.slice(start, end),
        lossMask: mask.slice(start, end),
        advantages: advantages.slice(start, end),
        oldLogprobs: oldLogprobs.slice(start, end),
        lossWeights: weights.slice(start, end),
        policyVersions: tokenPolicy.slice(start, end).map((p) => (p < 0 ? null : (policies[p] as string))),
      };
    }),
  };
}
