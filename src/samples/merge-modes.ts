import type { LossAggregation } from './loss-weights.js';
import { append, emptySequence, trainable, type MergeCall, type TrainingSequence } from './merge.js';

/**
 * How a rollout's calls become training sequences (`samples.merge`):
 * - exact:    consecutive calls merge when the next prompt's ids start with the sequence so far
 *             (merge.ts); a harness that sends its history back verbatim gives one sequence.
 * - tito:     token in, token out: the gateway splices the model's own ids into the earlier turns
 *             it recognises and sends ids to the backend, so the journaled prompt ids already
 *             extend the sequence; the batch stage merges exactly as `exact` does.
 * - stepwise: each call's each choice is its own sequence (prompt masked, completion trained),
 *             sharing the rollout's advantage; for harnesses that rewrite their history freely.
 */
export const MERGE_MODES = ['exact', 'tito', 'stepwise'] as const;
export type MergeMode = (typeof MERGE_MODES)[number];

/**
 * The loss normalization of a `samples` section: the one set, or the mode's own. Stepwise counts
 * each rollout once however many calls it made (rollout-mean); a merged rollout is already one
 * sequence or a few, so the others keep token-mean.
 */
export function lossAggregationOf(settings: {
  merge: MergeMode;
  lossAggregation?: LossAggregation | undefined;
}): LossAggregation {
  return settings.lossAggregation ?? (settings.merge === 'stepwise' ? 'rollout-mean' : 'token-mean');
}

/**
 * One sequence per choice of each call, in call order: the call's prompt (masked) followed by the
 * choice's completion (trained with its log-probs). Calls without token ids are left out, as
 * merging leaves them out (it counts them).
 */
export function stepSequences(rolloutId: string, calls: readonly MergeCall[]): TrainingSequence[] {
  const sequences: TrainingSequence[] = [];
  for (const call of calls) {
    const promptIds = call.promptIds;
    if (!promptIds || !trainable(call)) continue;
    call.choices.forEach((choice, i) => {
      const sequence = emptySequence(rolloutId);
      append(sequence, promptIds, 0, null);
      append(sequence, choice.completionIds ?? [], 1, choice.logprobs);
      sequence.spans.push({
        callId: call.callId,
        choice: i,
        start: promptIds.length,
        end: sequence.ids.length,
        policyVersion: call.policyVersion,
        finishReason: choice.finishReason,
      });
      sequences.push(sequence);
    });
  }
  return sequences;
}
