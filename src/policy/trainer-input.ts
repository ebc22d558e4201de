import { readFileSync } from 'node:fs';
import { decodeBatch, type DecodedBatch } from '../samples/batch-artifact.js';
import { safetensorsMetadata } from '../samples/safetensors.js';
import { loadCheckpoint, type Checkpoint } from './checkpoint.js';

/**
 * What a trainer refuses before training, with the fix: retrying cannot help (the trainer exits 2
 * and the policy update is not retried), and nothing is written or registered.
 */
export class TrainerInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TrainerInputError';
  }
}

export const BATCH_FORMAT = 'rein-batch/1';

export function readBatch(file: string): DecodedBatch {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new TrainerInputError(`cannot read the batch ${file}: ${(err as Error).message}`);
  }
  let format: string | undefined;
  try {
    format = safetensorsMetadata(bytes).format;
  } catch (err) {
    throw new TrainerInputError(
      `${file} is not a safetensors batch (${(err as Error).message}); pass the batch artifact the batch stage wrote`,
    );
  }
  if (format !== BATCH_FORMAT) {
    throw new TrainerInputError(
      `${file} is a batch of format ${format ?? '(none)'}; this trainer reads ${BATCH_FORMAT} — rebuild the batch with this Rein version, or use a trainer of the batch's version`,
    );
  }
  try {
    return decodeBatch(bytes);
  } catch (err) {
    throw new TrainerInputError(
      `${file}: ${(err as Error).message}; the batch is damaged — rebuild it from the journal`,
    );
  }
}

export function loadTrainable(dir: string): Checkpoint {
  try {
    return loadCheckpoint(dir);
  } catch (err) {
    throw new TrainerInputError(`cannot train from ${dir}: ${(err as Error).message}`);
  }
}

/** The batch's ids come from the checkpoint's tokenizer and fit its vocabulary and context. */
export function checkBatchFits(batch: DecodedBatch, checkpoint: Checkpoint): void {
  const recorded = batch.metadata.tokenizer_sha256;
  if (recorded && checkpoint.tokenizer.fileSha256 && recorded !== checkpoint.tokenizer.fileSha256) {
    throw new TrainerInputError(
      `the batch was built with another tokenizer (tokenizer.json ${recorded.slice(0, 12)}…) than ${checkpoint.dir} has (${checkpoint.tokenizer.fileSha256.slice(0, 12)}…); train the checkpoint the rollouts were sampled from, or set samples.tokenizerDir to its folder`,
    );
  }
  const { vocabSize, maxPositions } = checkpoint.config;
  for (const s of batch.sequences) {
    const outside = s.ids.find((id) => id < 0 || id >= vocabSize);
    if (outside !== undefined) {
      throw new TrainerInputError(
        `the batch has token id ${outside}, outside the vocabulary of ${checkpoint.dir} (${vocabSize}): it was built for another tokenizer; train the checkpoint the rollouts were sampled from`,
      );
    }
    if (s.ids.length > maxPositions) {
      throw new TrainerInputError(
        `a sequence of ${s.ids.length} tokens exceeds the context of ${checkpoint.dir} (${maxPositions}); lower samples.maxPromptTokens / samples.maxResponseTokens`,
      );
    }
  }
}
