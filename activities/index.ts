import { createBatchActivities, type BatchActivityDeps } from './build-batch.js';
import { createPreflightActivities, type PreflightActivityDeps } from './preflight.js';
import { createRolloutActivities, type RolloutActivityDeps } from './run-rollouts.js';
import { createPolicyActivities, type PolicyActivityDeps } from './update-policy.js';

export type ActivityDeps = PreflightActivityDeps & BatchActivityDeps & RolloutActivityDeps & PolicyActivityDeps;

/** Every activity the Rein worker registers, built from their dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createPreflightActivities(deps),
    ...createBatchActivities(deps),
    ...createRolloutActivities(deps),
    ...createPolicyActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
