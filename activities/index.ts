import { createBatchActivities, type BatchActivityDeps } from './build-batch.js';
import { createPreflightActivities, type PreflightActivityDeps } from './preflight.js';

export type ActivityDeps = PreflightActivityDeps & BatchActivityDeps;

/** Every activity the Rein worker registers, built from their dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createPreflightActivities(deps),
    ...createBatchActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
