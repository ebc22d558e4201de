import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { ArtifactNotFoundError, type ArtifactStore } from '../artifacts/artifact-store.js';
import { readCheckpointFile } from '../artifacts/folders.js';
import type { PolicyRecord } from '../registry/policy-registry.js';
import { decodeBatch, type DecodedBatch } from '../samples/batch-artifact.js';
import { iterationArtifacts } from '../artifacts/iteration-artifacts.js';
import { decodeTokenLogprobs, TOKEN_LOGPROBS_FILE } from '../samples/token-logprobs.js';

/**
 * The per-token view of a rollout's training sequences in one iteration's batch: each token, whether
 * it was trained, its loss weight and advantage, the behaviour log-prob the gateway journaled and the
 * trainer's log-prob of the same token under the parent, read from the artifacts both trainers write.
 */
export interface TokenRow {
  id: number;
  /** The token decoded alone (byte-level pieces may be partial characters); null without the tokenizer. */
  text: string | null;
  trained: boolean;
  weight: number;
  advantage: number;
  /** The sampling policy's log-prob, as the gateway journaled it; null on untrained tokens. */
  behaviourLogprob: number | null;
  /** The parent's log-prob as the trainer computed it before its update; null on untrained tokens or unrecorded. */
  trainerLogprob: number | null;
  /** The policy version that sampled the token; null on untrained tokens. */
  policyVersion: string | null;
}

export interface RolloutTokens {
  runId: string;
  iteration: number;
  rolloutId: string;
  batchUri: string;
  /** The version trained on this batch, once registered. */
  trainedVersion: string | null;
  /** Why the trainer's log-probs are missing (update not finished, a trainer that predates them); null when shown. */
  trainerLogprobsMissing: string | null;
  sequences: Array<{ index: number; tokensTotal: number; trainedTokens: number; tokens: TokenRow[] }>;
}

export class TokenViewNotFoundError extends Error {
  override name = 'TokenViewNotFoundError';
}

export interface TokenViewSources {
  artifacts: ArtifactStore;
  /** The run's policy trained in this iteration, when the registry has it. */
  trained: Pick<PolicyRecord, 'version' | 'checkpointUri' | 'batchContentHash'> | undefined;
}

/** Tokens shown per sequence at most: a long sequence's first ones, the rest counted in tokensTotal. */
export const MAX_TOKENS_SHOWN = 20_000;

export async function rolloutTokens(
  ask: { runId: string; iteration: number; rolloutId: string },
  sources: TokenViewSources,
): Promise<RolloutTokens> {
  const { artifacts, trained } = sources;
  const batchUri = await batchOf(artifacts, ask.runId, ask.iteration, trained?.batchContentHash ?? undefined);
  const batch = decodeBatch(await artifacts.get(batchUri));
  const offsets = sequenceOffsets(batch);
  const mine = batch.sequences.flatMap((s, i) => (s.rolloutId === ask.rolloutId ? [i] : []));
  if (mine.length === 0)
    throw new TokenViewNotFoundError(
      `rollout ${ask.rolloutId} has no sequence in iteration ${ask.iteration}'s batch: it is not of this iteration, or the batch left it out (the iteration's batch report says why)`,
    );
  const trainer = await trainerLogprobs(artifacts, trained, batch.metadata.content_hash ?? '');
  const decode = trained ? await tokenDecoder(artifacts, trained.checkpointUri) : null;
  return {
    ...ask,
    batchUri,
    trainedVersion: trained?.version ?? null,
    trainerLogprobsMissing: trainer.missing,
    sequences: mine.map((index) => {
      const s = batch.sequences[index] as DecodedBatch['sequences'][number];
      const at = offsets[index] as number;
      const shown = Math.min(s.ids.length, MAX_TOKENS_SHOWN);
      const tokens = s.ids.slice(0, shown).map((id, t): TokenRow => {
        const isTrained = s.lossMask[t] === 1;
        return {
          id,
          text: decode?.(id) ?? null,
          trained: isTrained,
          weight: s.lossWeights[t] as number,
          advantage: s.advantages[t] as number,
          behaviourLogprob: isTrained ? (s.oldLogprobs[t] as number) : null,
          trainerLogprob: isTrained && trainer.values && t > 0 ? (trainer.values[at + t] as number) : null,
          policyVersion: s.policyVersions[t] ?? null,
        };
      });
      return { index, tokensTotal: s.ids.length, trainedTokens: s.lossMask.filter((m) => m === 1).length, tokens };
    }),
  };
}

/**
 * The iteration's batch artifact: the one the trained version names by content hash, else the newest the batch stage
 * wrote under the iteration (a retried stage may have written more than one).
 */
async function batchOf(store: ArtifactStore, runId: string, iteration: number, contentHash: string | undefined) {
  const entries = (await store.listEntries(`${iterationArtifacts(runId, iteration)}/`)).filter((e) =>
    /\/batch-[0-9a-f]+\.safetensors$/.test(e.uri),
  );
  const named =
    contentHash && entries.find((e) => path.posix.basename(e.uri).startsWith(`batch-${contentHash.slice(0, 16)}`));
  const newest = entries.sort((a, b) => b.modifiedAt - a.modifiedAt)[0];
  const found = named || newest;
  if (!found)
    throw new TokenViewNotFoundError(
      `run ${runId} has no batch for iteration ${iteration} (yet): the per-token view reads the batch its batch stage writes`,
    );
  return found.uri;
}

/** Where each sequence starts among the batch's tokens (the trainer's log-probs are aligned with them). */
function sequenceOffsets(batch: DecodedBatch): number[] {
  let at = 0;
  return batch.sequences.map((s) => {
    const start = at;
    at += s.ids.length;
    return start;
  });
}

async function trainerLogprobs(
  artifacts: ArtifactStore,
  trained: TokenViewSources['trained'],
  batchContentHash: string,
): Promise<{ values: Float32Array | null; missing: string | null }> {
  if (!trained)
    return { values: null, missing: 'the policy update of this iteration has not registered a version yet' };
  if (trained.batchContentHash !== batchContentHash)
    return { values: null, missing: `${trained.version} was trained on another batch than this one` };
  try {
    const file = decodeTokenLogprobs(await readCheckpointFile(artifacts, trained.checkpointUri, TOKEN_LOGPROBS_FILE));
    if (file.batchContentHash !== batchContentHash)
      return { values: null, missing: `${TOKEN_LOGPROBS_FILE} of ${trained.version} belongs to another batch` };
    return { values: file.values, missing: null };
  } catch (err) {
    if (!(err instanceof ArtifactNotFoundError)) throw err;
    return { values: null, missing: `${trained.version}'s trainer did not record them (a trainer that predates them)` };
  }
}

/** Decodes one token id with the checkpoint's tokenizer; null when the checkpoint has no tokenizer.json. */
async function tokenDecoder(artifacts: ArtifactStore, checkpointUri: string): Promise<((id: number) => string) | null> {
  const read = async (name: string) => {
    try {
      return JSON.parse((await readCheckpointFile(artifacts, checkpointUri, name)).toString('utf8')) as object;
    } catch (err) {
      if (err instanceof ArtifactNotFoundError) return undefined;
      throw err;
    }
  };
  const [json, config] = [await read('tokenizer.json'), await read('tokenizer_config.json')];
  if (!json) return null;
  const tokenizer = new Tokenizer(json, config ?? {});
  return (id) => tokenizer.decode([id], { skip_special_tokens: false, clean_up_tokenization_spaces: false });
}
