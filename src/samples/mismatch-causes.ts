/**
 * Why a call of a rollout did not extend the training sequence before it (merge.ts finds the cause by comparing the
 * decoded texts). Data only: the console's filter lists them too.
 */
export const MISMATCH_CAUSES = [
  /** The chat template changed earlier turns when re-rendering them (e.g. stripped thinking). */
  'chat_template_rewrote_history',
  /** Same text, different token ids. */
  'retokenization_drift',
  /**
   * An earlier completion's ids were not valid UTF-8 on their own; the backend decoded them to U+FFFD, and the text
   * the harness sent back cannot encode to the same ids. Neither the harness's doing nor trainable as one sequence.
   */
  'lossy_decode',
  /** The harness edited, summarized or truncated its history. */
  'harness_rewrote_history',
  'policy_version_changed',
  /** Nothing in common: another conversation (a sub-agent, a fresh context). */
  'new_conversation',
  'other',
] as const;
