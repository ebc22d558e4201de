/**
 * The one table of failure classes: why a rollout failed, whether it is scored, whether it is retried. The type, the
 * schemas, the unscored list, the docs (docs/rollouts.md, written by `npm run docs`) and the console read it from
 * here. Data only, no imports: the console's pages bundle it.
 */
export const FAILURE_CLASSES = [
  'model',
  'policy_output',
  'tool',
  'permission',
  'harness',
  'verifier',
  'environment',
  'timeout',
  'orchestrator',
  'infrastructure',
  'irreversible',
] as const;
export type FailureClass = (typeof FAILURE_CLASSES)[number];

export interface FailureClassRow {
  /** When a failed rollout gets the class. */
  when: string;
  /**
   * The policy's doing: scored with the reward the verifier gives and trained on. Unscored classes are Rein's
   * machinery or the task's environment: no reward, never a failure in the gate, run again.
   */
  scored: boolean;
  /** Whether and when it is run again. */
  retried: string;
}

export const FAILURE_CLASS_TABLE: Readonly<Record<FailureClass, FailureClassRow>> = {
  model: {
    when: "the harness failed after the model's last reply stopped at max tokens, or refused (`refusal` field, or `rollouts.refusalPatterns`)",
    scored: true,
    retried: 'no',
  },
  policy_output: {
    when: "the harness failed after the model's last reply could not be parsed: tool arguments that are not a JSON object, a tool the request did not offer, or a tool call the server left unparsed in the text; the evidence names the call and what could not be parsed",
    scored: true,
    retried: 'no',
  },
  tool: { when: 'the last span the harness reported failed', scored: true, retried: 'no' },
  permission: { when: 'the last span the harness reported was denied', scored: true, retried: 'no' },
  irreversible: {
    when: 'a span the harness marked `irreversible: true` failed (whatever the exit code)',
    scored: true,
    retried: 'no',
  },
  harness: { when: 'non-zero exit (crash) with none of the above', scored: true, retried: 'no' },
  timeout: { when: 'ran past its timeout (from the moment it ran)', scored: true, retried: 'no' },
  verifier: {
    when: 'the verifier failed or printed no usable JSON',
    scored: false,
    retried: 'when its set runs again',
  },
  environment: {
    when: 'the harness cannot start (missing binary, image pull, container config)',
    scored: false,
    retried: 'when its set runs again',
  },
  infrastructure: {
    when: 'a model call failed upstream or could not be routed, the pod was evicted or never started, the API server kept failing',
    scored: false,
    retried: 'as a new attempt, up to `rollouts.maxAttempts`; then when its set runs again',
  },
  orchestrator: {
    when: 'the runner of an attempt was lost (its worker died)',
    scored: false,
    retried: 'the next worker starts a new attempt',
  },
};

/**
 * Failures of Rein's machinery or the task's environment, not of the policy: such a rollout gets no reward (it is
 * never scored as a failure), and running its batch again runs it again.
 */
export const UNSCORED_FAILURE_CLASSES: readonly FailureClass[] = FAILURE_CLASSES.filter(
  (c) => !FAILURE_CLASS_TABLE[c].scored,
);

/** The table as the docs show it (docs/rollouts.md): the rows in FAILURE_CLASS_TABLE's order. */
export function failureClassesMarkdown(): string {
  const rows = Object.entries(FAILURE_CLASS_TABLE).map(
    ([c, row]) => `| \`${c}\` | ${row.when} | ${row.scored ? 'yes' : 'no'} | ${row.retried} |`,
  );
  return ['| class | when | scored and trained? | retried? |', '|---|---|---|---|', ...rows].join('\n');
}
