import { commonPrefixLength } from '../store/token-codec.js';
import type { MISMATCH_CAUSES } from './mismatch-causes.js';

/**
 * Turns the journaled calls of one rollout into training sequences. Consecutive calls merge into
 * one sequence only when the next prompt's token ids start with exactly the ids of the sequence so
 * far (prompt + completion): what the harness inserted in between (tool output, its own text) is
 * masked out of the loss, the completions are trained with their log-probs. Otherwise a new
 * sequence starts, and the mismatch gets a cause found by comparing the decoded texts.
 */
export interface MergeCall {
  callId: string;
  policyVersion: string;
  /** Null when the backend returned no token ids for the call. */
  promptIds: readonly number[] | null;
  /** Known from the journal: the prompt's first prefixLength ids are call ref's prompt + first completion. */
  extends?: { ref: string; prefixLength: number } | null;
  choices: ReadonlyArray<{
    completionIds: readonly number[] | null;
    logprobs: readonly number[] | null;
    finishReason: string | null;
  }>;
}

/** Why a call did not extend the sequence before it; each cause is described where it is listed. */
export type MismatchCause = (typeof MISMATCH_CAUSES)[number];

export interface TrainedSpan {
  callId: string;
  /** Which choice of the call (n > 1) this span trains. */
  choice: number;
  /** Token offsets in the sequence, end exclusive. */
  start: number;
  end: number;
  policyVersion: string;
  finishReason: string | null;
}

export interface TrainingSequence {
  rolloutId: string;
  ids: number[];
  /** 1 where the token is a completion the policy produced and is trained; 0 for prompt and inserted tokens. */
  lossMask: number[];
  /** The sampling policy's log-prob of each trained token; 0 elsewhere. */
  oldLogprobs: number[];
  spans: TrainedSpan[];
}

export interface Mismatch {
  callId: string;
  cause: MismatchCause;
  /** First token where the new prompt departs from the sequence it was compared with. */
  divergesAt: number;
}

export interface MergeResult {
  sequences: TrainingSequence[];
  mismatches: Mismatch[];
  /** Calls whose prompt extended an earlier sequence. */
  mergedCalls: number;
  /** Calls without token ids (nothing to train on until retokenized). */
  skippedCalls: string[];
  /** Trained completions that had no log-probs from the backend. */
  missingLogprobs: number;
}

export interface Detokenizer {
  decode(ids: readonly number[]): string;
}

export function mergeRollout(rolloutId: string, calls: readonly MergeCall[], tokenizer: Detokenizer): MergeResult {
  const sequences: TrainingSequence[] = [];
  const mismatches: Mismatch[] = [];
  const skippedCalls: string[] = [];
  // Sequences a later prompt may extend, most recent last, with the policy version that produced their end.
  let open: Array<{ sequence: TrainingSequence; policyVersion: string }> = [];
  let mergedCalls = 0;
  let missingLogprobs = 0;

  for (const call of calls) {
    const promptIds = call.promptIds;
    if (!promptIds || !trainable(call)) {
      skippedCalls.push(call.callId);
      continue;
    }
    const base = findLast(open, ({ sequence }) => extendsKnown(sequence, call) || isPrefix(sequence.ids, promptIds));
    if (base) mergedCalls++;
    else if (open.length > 0) {
      const previous = open[open.length - 1] as (typeof open)[number];
      mismatches.push({
        callId: call.callId,
        cause: mismatchCause(previous.sequence, promptIds, previous.policyVersion !== call.policyVersion, tokenizer),
        divergesAt: commonPrefixLength(previous.sequence.ids, promptIds),
      });
    }

    const extended = call.choices.map((choice, i) => {
      // The last choice grows the base in place; earlier ones (n > 1) branch off a copy.
      const sequence = !base
        ? emptySequence(rolloutId)
        : i === call.choices.length - 1
          ? base.sequence
          : copy(base.sequence);
      const completionIds = choice.completionIds ?? [];
      append(sequence, promptIds.slice(sequence.ids.length), 0, null);
      if (!choice.logprobs && completionIds.length > 0) missingLogprobs++;
      const start = sequence.ids.length;
      append(sequence, completionIds, 1, choice.logprobs);
      sequence.spans.push({
        callId: call.callId,
        choice: i,
        start,
        end: sequence.ids.length,
        policyVersion: call.policyVersion,
        finishReason: choice.finishReason,
      });
      return sequence;
    });

    // The extended sequence replaces the one it grew from; each further choice is its own branch.
    if (base) open = open.filter((o) => o !== base);
    for (const sequence of extended) open.push({ sequence, policyVersion: call.policyVersion });
    if (base) {
      const index = sequences.indexOf(base.sequence);
      sequences.splice(index, 1, ...extended);
    } else {
      sequences.push(...extended);
    }
  }
  return { sequences, mismatches, mergedCalls, skippedCalls, missingLogprobs };
}

/** A call there is something to train on in: its prompt ids and every choice's completion ids journaled. */
export function trainable(call: MergeCall): boolean {
  return (
    !!call.promptIds &&
    call.promptIds.length > 0 &&
    call.choices.length > 0 &&
    call.choices.every((c) => c.completionIds !== null)
  );
}

/** Appends ids to a sequence: trained (mask 1, with their log-probs) or not (mask 0). */
export function append(
  sequence: TrainingSequence,
  ids: readonly number[],
  mask: 0 | 1,
  logprobs: readonly number[] | null,
): void {
  for (let i = 0; i < ids.length; i++) {
    sequence.ids.push(ids[i] as number);
    sequence.lossMask.push(mask);
    sequence.oldLogprobs.push(mask && logprobs ? (logprobs[i] ?? 0) : 0);
  }
}

export function emptySequence(rolloutId: string): TrainingSequence {
  return { rolloutId, ids: [], lossMask: [], oldLogprobs: [], spans: [] };
}

function copy(sequence: TrainingSequence): TrainingSequence {
  return {
    rolloutId: sequence.rolloutId,
    ids: [...sequence.ids],
    lossMask: [...sequence.lossMask],
    oldLogprobs: [...sequence.oldLogprobs],
    spans: [...sequence.spans],
  };
}

/**
 * True when the journal already established that the prompt extends this sequence: the sequence
 * ends with the first completion of the call the prompt was delta-encoded against, and holds no
 * more than the shared prefix.
 */
function extendsKnown(sequence: TrainingSequence, call: MergeCall): boolean {
  const last = sequence.spans[sequence.spans.length - 1];
  return (
    !!call.extends &&
    last?.callId === call.extends.ref &&
    last.end === sequence.ids.length &&
    last.choice === 0 &&
    sequence.ids.length <= call.extends.prefixLength
  );
}

function isPrefix(prefix: readonly number[], ids: readonly number[]): boolean {
  return prefix.length <= ids.length && commonPrefixLength(prefix, ids) === prefix.length;
}

function findLast<T>(items: readonly T[], predicate: (item: T) => boolean): T | undefined {
  for (let i = items.length - 1; i >= 0; i--) if (predicate(items[i] as T)) return items[i];
  return undefined;
}

const THINKING = /<think>[\s\S]*?<\/think>\s*/g;

/** Why a prompt does not extend the previous sequence, judged on the decoded texts. */
export function mismatchCause(
  previous: Pick<TrainingSequence, 'ids' | 'spans'>,
  prompt: readonly number[],
  policyChanged: boolean,
  tokenizer: Detokenizer,
): MismatchCause {
  const divergesAt = commonPrefixLength(previous.ids, prompt);
  if (divergesAt === 0) return 'new_conversation';
  const before = tokenizer.decode(previous.ids);
  const now = tokenizer.decode(prompt);
  if (brokeAtLossyDecode(previous, divergesAt, before, now, tokenizer)) return 'lossy_decode';
  if (now.startsWith(before)) return 'retokenization_drift';
  const withoutThinking = before.replace(THINKING, '');
  if (withoutThinking !== before && now.startsWith(withoutThinking)) return 'chat_template_rewrote_history';
  if (policyChanged) return 'policy_version_changed';
  // Sharing a substantial beginning means the same conversation, edited or cut by the harness.
  const sharedText = commonPrefixLength(
    [...before].map((c) => c.charCodeAt(0)),
    [...now].map((c) => c.charCodeAt(0)),
  );
  return sharedText >= before.length / 4 ? 'harness_rewrote_history' : 'other';
}

const REPLACEMENT = '\uFFFD';

/**
 * True when the prompt departs from the sequence inside a completion, at the first place where that completion's
 * ids decode lossily (bytes that are not valid UTF-8 on their own, decoded to U+FFFD), with the texts equal up to
 * there. Whatever the backend made of those bytes (one U+FFFD, one per token, nothing), the harness sent back text
 * whose ids cannot be the ones sampled: the break starts at the decode, not at anything the harness changed.
 */
function brokeAtLossyDecode(
  previous: Pick<TrainingSequence, 'ids' | 'spans'>,
  divergesAt: number,
  before: string,
  now: string,
  tokenizer: Detokenizer,
): boolean {
  const span = previous.spans.find((s) => s.start <= divergesAt && divergesAt < s.end);
  if (!span) return false;
  // The ids agree up to divergesAt; the replaced bytes must come at or after that point, inside the completion.
  const agreed = tokenizer.decode(previous.ids.slice(0, divergesAt)).length;
  const lossyAt = before.indexOf(REPLACEMENT, agreed);
  if (lossyAt < 0 || lossyAt >= tokenizer.decode(previous.ids.slice(0, span.end)).length) return false;
  let same = 0;
  while (same < lossyAt && before[same] === now[same]) same++;
  return same === lossyAt;
}
