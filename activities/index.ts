import { createBatchActivities, type BatchActivityDeps } from './build-batch.js';
import { createPreflightActivities, type PreflightActivityDeps } from './preflight.js';
import { createReleaseActivities, type ReleaseActivityDeps } from './release.js';
import { createRolloutActivities, type RolloutActivityDeps } from './run-rollouts.js';
import { createShadowActivities, type ShadowActivityDeps } from './shadow.js';
import { createPolicyActivities, type PolicyActivityDeps } from './update-policy.js';

export type ActivityDeps = PreflightActivityDeps & BatchActivityDeps & RolloutActivityDeps & PolicyActivityDeps & ReleaseActivityDeps & ShadowActivityDeps;

/** Every activity the Rein worker registers, built from their dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createPreflightActivities(deps),
    ...createBatchActivities(deps),
    ...createRolloutActivities(deps),
    ...createPolicyActivities(deps),
    ...createReleaseActivities(deps),
    ...createShadowActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
