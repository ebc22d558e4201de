/**
 * Where an iteration's artifacts are kept in the artifact store: its batch (`batch-<hash>.safetensors`), the batch's
 * data-quality report and the policy update's log, under `runs/<run>/iterations/<n>/`.
 */
export const iterationArtifacts = (runId: string | undefined, iteration: number) =>
  `${runId === undefined ? '' : `runs/${runId}/`}iterations/${iteration}`;

/** An iteration's data-quality report (what the rollout browser's merge-cause filter reads). */
export const batchReportName = (runId: string | undefined, iteration: number) =>
  `${iterationArtifacts(runId, iteration)}/batch-report.json`;

/** An iteration's trainer log, uploaded redacted while the update runs (the console's live log). */
export const updateLogName = (runId: string, iteration: number) => `${iterationArtifacts(runId, iteration)}/update.log`;
