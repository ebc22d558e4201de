import { assertFreeSpace, DEFAULT_MIN_FREE_MEGABYTES, DiskSpaceError, megabytes } from '../src/preflight/disk-space.js';
import { createBatchActivities, type BatchActivityDeps } from './build-batch.js';
import { createEnvironmentActivities, type EnvironmentActivityDeps } from './environment.js';
import { createNotifyActivities, type NotifyActivityDeps } from './notify.js';
import { createPreflightActivities, type PreflightActivityDeps } from './preflight.js';
import { createReleaseActivities, type ReleaseActivityDeps } from './release.js';
import { createRolloutActivities, type RolloutActivityDeps } from './run-rollouts.js';
import { createShadowActivities, type ShadowActivityDeps } from './shadow.js';
import { DiskSpaceFailure } from '../workflows/failures.js';
import { createPolicyActivities, type PolicyActivityDeps } from './update-policy.js';

export type ActivityDeps = PreflightActivityDeps &
  BatchActivityDeps &
  RolloutActivityDeps &
  PolicyActivityDeps &
  ReleaseActivityDeps &
  ShadowActivityDeps &
  NotifyActivityDeps &
  EnvironmentActivityDeps;

/** Every activity the Rein worker registers, built from their dependencies. */
export function createActivities(deps: ActivityDeps) {
  return refusedWhenDiskIsLow(
    {
      ...createPreflightActivities(deps),
      ...createBatchActivities(deps),
      ...createRolloutActivities(deps),
      ...createPolicyActivities(deps),
      ...createReleaseActivities(deps),
      ...createShadowActivities(deps),
      ...createNotifyActivities(deps),
      ...createEnvironmentActivities(deps),
    },
    deps,
  );
}

export type Activities = ReturnType<typeof createActivities>;

/**
 * Preflight measures free space and reports it; refusing would hide the report. A notification
 * writes nothing here, and a run that fails for want of space is one to tell about.
 */
const REPORTS_DISK_SPACE = new Set(['checkWorkerHost', 'notify']);

/**
 * Each activity first checks the free space in dataDir: on a full disk, SQLite and artifact
 * writes fail deep inside a stage with errors that do not say why. Retryable, since freeing
 * space is the fix and the stage's work must not be lost.
 */
function refusedWhenDiskIsLow<T extends Record<string, (...args: never[]) => Promise<unknown>>>(
  activities: T,
  deps: Pick<ActivityDeps, 'dataDir' | 'minFreeBytes'>,
): T {
  const floor = deps.minFreeBytes ?? megabytes(DEFAULT_MIN_FREE_MEGABYTES);
  const guarded = Object.entries(activities).map(([name, activity]) => {
    if (REPORTS_DISK_SPACE.has(name)) return [name, activity];
    return [
      name,
      async (...args: Parameters<typeof activity>) => {
        try {
          await assertFreeSpace(deps.dataDir, floor);
        } catch (err) {
          if (err instanceof DiskSpaceError) throw new DiskSpaceFailure(err.message);
          throw err;
        }
        return activity(...args);
      },
    ];
  });
  return Object.fromEntries(guarded) as T;
}
