import { proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { HostReport } from '../src/preflight/preflight.js';
import { ReinStage } from './search-attributes.js';

const { checkWorkerHost } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { maximumAttempts: 3 },
  summary: 'check the worker host',
});

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
