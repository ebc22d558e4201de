import { proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { HostReport } from '../src/preflight/preflight.js';
import { HOST_CHECK_ACTIVITY } from './activity-options.js';
import { ReinStage } from './search-attributes.js';

const { checkWorkerHost } = proxyActivities<Activities>(HOST_CHECK_ACTIVITY);

export interface PreflightResult {
  ok: boolean;
  worker: HostReport;
}

/** Checks that a Rein worker is reachable through Temporal and its host can do the work. */
export async function preflight(): Promise<PreflightResult> {
  upsertSearchAttributes([{ key: ReinStage, value: 'preflight' }]);
  const worker = await checkWorkerHost();
  const ok = worker.checks.every((c) => c.ok);
  upsertSearchAttributes([{ key: ReinStage, value: ok ? 'preflight-passed' : 'preflight-failed' }]);
  return { ok, worker };
}
