/**
 * The rigger (issue 32): from the last iterations' training rollouts it names recurring
 * weaknesses (rigger-weaknesses.ts, a table for the run report) and proposes environment variants
 * aimed at them (rigger-proposals.ts, rule-based). Validation by fresh rollouts and the
 * curriculum that mixes kept variants into training live elsewhere (validation.ts,
 * variant-tasks.ts); everything here is a pure function of its evidence, so a run's report can
 * be recomputed from its ledger.
 *
 * Fewer steps alone prove nothing (an agent that gives up also uses fewer): the evidence marks
 * give-ups (isGiveUp), and `gives_up` is a weakness of its own.
 */
export {
  GIVE_UP_STEP_FRACTION,
  isGiveUp,
  typicalSolvedSteps,
  type EndedAttempt,
  type RolloutEvidence,
  type Weakness,
  type WeaknessKind,
} from './rigger-evidence.js';
export { MALFORMED_OUTPUT_CLASSES, weaknessTable, weaknesses, type WeaknessOptions } from './rigger-weaknesses.js';
export {
  DEFAULT_MAX_PROPOSALS,
  proposeVariants,
  weaknessesWithoutProposal,
  type Proposal,
  type ProposalOptions,
  type RiggedEnvironment,
} from './rigger-proposals.js';
