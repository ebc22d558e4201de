import { CancellationScope, proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { RunRolloutsSummary } from '../activities/run-rollouts.js';
import type { ShadowReportSummary } from '../activities/shadow.js';
import { REGISTRY_ACTIVITY } from './activity-options.js';
import { rolloutSetActivity } from './rollouts-activity.js';
import { ReinPolicyVersion, ReinStage } from './search-attributes.js';
import type { HeldoutSelection } from './task-selection.js';

// These steps do not heartbeat: start-to-close alone bounds them.
const { startMirror, stopMirror, shadowReport } = proxyActivities<Activities>(REGISTRY_ACTIVITY);

export interface ShadowRunInput {
  candidate: string;
  /** The alias the harness asks for (production): its version acts, the candidate only answers in the shadow. */
  alias: string;
  heldout: HeldoutSelection;
  samplesPerTask: number;
  /** The run's config, stored in the artifact store: its harness runs the shadow rollouts. */
  configHash: string;
  /** Where the rollouts go: the same batch again resumes it rather than running it twice. */
  batchId: string;
  heartbeatTimeoutSeconds?: number;
}

export interface ShadowRunResult {
  candidate: string;
  alias: string;
  /** The version that acted (the alias's when the mirror was set). */
  incumbent: string;
  rollouts: RunRolloutsSummary;
  report: ShadowReportSummary;
}

/**
 * An offline shadow run: the held-out tasks run through the real harness, unpinned, so
 * production acts, while the gateway mirrors every call to the candidate, whose answers are only
 * journaled; then the report over those rollouts. The mirror is cleared however the rollouts end,
 * cancellation included, so no production traffic stays mirrored after the run.
 */
export async function shadowRun(input: ShadowRunInput): Promise<ShadowRunResult> {
  const { candidate, alias, heldout, samplesPerTask, batchId } = input;
  upsertSearchAttributes([
    { key: ReinStage, value: 'shadow-mirror' },
    { key: ReinPolicyVersion, value: candidate },
  ]);
  // Outside the try: a mirror that was refused (someone else's is in place) is not this run's to clear.
  const mirror = await startMirror({ alias, candidate });
  let rollouts: RunRolloutsSummary;
  try {
    upsertSearchAttributes([{ key: ReinStage, value: 'shadow-rollouts' }]);
    rollouts = await rolloutSetActivity(
      `shadow run: ${heldout.taskIds.length} tasks x ${samplesPerTask} on ${alias}, mirrored to ${candidate}`,
      input.heartbeatTimeoutSeconds,
      {
        batchId,
        configHash: input.configHash,
        taskSet: heldout.taskSet,
        taskIds: heldout.taskIds,
        samplesPerTask,
        mode: 'shadow',
        policyVersion: null,
        ...(heldout.harnessEnv && { harnessEnv: heldout.harnessEnv }),
      },
    );
  } finally {
    await CancellationScope.nonCancellable(() => stopMirror({ alias, candidate }));
  }
  upsertSearchAttributes([{ key: ReinStage, value: 'shadow-report' }]);
  const report = await shadowReport({ candidate, batchId, taskIds: heldout.taskIds, samplesPerTask });
  upsertSearchAttributes([{ key: ReinStage, value: 'done' }]);
  return { candidate, alias, incumbent: mirror.incumbent, rollouts, report };
}
