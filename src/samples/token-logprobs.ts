import { decodeSafetensors, encodeSafetensors } from './safetensors.js';

/**
 * What both trainers write beside a trained checkpoint: the parent policy's log-prob of each token of
 * the batch as the trainer computes it (before any step), to set against the behaviour log-probs the
 * gateway journaled. A gap between the two is the train/inference mismatch an RL engineer looks for
 * first when a run misbehaves (other kernels, another precision, a stale sampler).
 *   trainer_logprobs  F32 [N]  aligned with the batch's input_ids; 0 on untrained tokens and on
 *                              each sequence's first token (nothing predicts it)
 * Metadata: format, batch_content_hash (the batch the values belong to). In a subfolder of the checkpoint: vLLM and
 * SGLang load every top-level *.safetensors of a full checkpoint that has no index.
 */
export const TOKEN_LOGPROBS_FILE = 'rein/token-logprobs.safetensors';
const FORMAT = 'rein-token-logprobs/1';

export function encodeTokenLogprobs(values: Float32Array, batchContentHash: string): Buffer {
  return encodeSafetensors(
    { trainer_logprobs: { dtype: 'F32', shape: [values.length], data: values } },
    { format: FORMAT, batch_content_hash: batchContentHash },
  );
}

export function decodeTokenLogprobs(bytes: Buffer): { batchContentHash: string; values: Float32Array } {
  const { tensors, metadata } = decodeSafetensors(bytes);
  const values = tensors.trainer_logprobs;
  if (metadata.format !== FORMAT || !values || !(values.data instanceof Float32Array))
    throw new Error(`not a Rein token log-probs file (format ${metadata.format ?? 'missing'})`);
  return { batchContentHash: metadata.batch_content_hash ?? '', values: values.data };
}

/** How far the trainer's log-probs are from the behaviour ones over the tokens both have. */
export interface LogprobAgreement {
  tokens: number;
  meanAbsDiff: number;
  maxAbsDiff: number;
}

/**
 * |trainer − behaviour| over trained tokens past each sequence's first. Sequences are given as the
 * trainers hold them (per-token arrays, trainer values aligned with the sequence's tokens).
 */
export function logprobAgreement(
  sequences: ReadonlyArray<{ lossMask: readonly number[]; oldLogprobs: readonly number[]; trainer: ArrayLike<number> }>,
): LogprobAgreement {
  let tokens = 0;
  let sum = 0;
  let max = 0;
  for (const s of sequences) {
    for (let t = 1; t < s.lossMask.length; t++) {
      if (s.lossMask[t] !== 1) continue;
      const diff = Math.abs((s.trainer[t] as number) - (s.oldLogprobs[t] as number));
      tokens++;
      sum += diff;
      max = Math.max(max, diff);
    }
  }
  return { tokens, meanAbsDiff: tokens === 0 ? 0 : sum / tokens, maxAbsDiff: max };
}
