import type { RunRolloutsSummary } from '../activities/run-rollouts.js';

/**
 * An iteration's training rollouts, run before the iteration trains on them (the asynchronous
 * schedule), and the policy version they sampled from.
 */
export interface SampledRollouts {
  iteration: number;
  policyVersion: string;
  rollouts: RunRolloutsSummary;
}
