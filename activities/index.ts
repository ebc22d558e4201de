import { createPreflightActivities, type PreflightActivityDeps } from './preflight.js';

export type ActivityDeps = PreflightActivityDeps;

/** Every activity the Rein worker registers, built from their dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createPreflightActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
