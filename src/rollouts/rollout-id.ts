/**
 * The one rule for rollout ids, wherever they come from (a caller's POST /api/rollouts, the
 * runner's `<batchId>.<task id>.<sample>`) and wherever they are used (the gateway's routes take
 * ids up to this length as path parameters: see startGateway's maxParamLength).
 */
export const ROLLOUT_ID_MAX_LENGTH = 128;
export const ROLLOUT_ID_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,${ROLLOUT_ID_MAX_LENGTH - 1}}$`);
export const ROLLOUT_ID_RULE = `letters, digits and . _ : - (at most ${ROLLOUT_ID_MAX_LENGTH}, starting with a letter or digit)`;

/** How a task id appears in rollout ids: characters other than letters, digits and . _ : - become _. */
export function taskIdKey(taskId: string): string {
  return taskId.replace(/[^A-Za-z0-9._:-]/g, '_');
}

/**
 * A rollout's id within its batch: stable, so a batch run again finds its rollouts (and a
 * workflow can name them). Task sets refuse two ids with the same key (see loadTaskSet).
 */
export function rolloutIdFor(batchId: string, taskId: string, sample: number): string {
  return `${batchId}.${taskIdKey(taskId)}.${sample}`;
}

/** Each task `samplesPerTask` times, task by task: the order a batch's rollouts are issued and listed in. */
export function taskSamples<T>(tasks: readonly T[], samplesPerTask: number): Array<{ task: T; sample: number }> {
  return tasks.flatMap((task) => Array.from({ length: samplesPerTask }, (_, sample) => ({ task, sample })));
}

/** Some of a batch's rollouts by reference: which tasks, and how many samples of each. */
export interface RolloutSelection {
  batchId: string;
  taskIds: readonly string[];
  samplesPerTask: number;
}

/** The ids of a selection's rollouts (its task ids × samples in the batch), in the order the batch runs them. */
export function selectionRolloutIds(selection: RolloutSelection): string[] {
  return taskSamples(selection.taskIds, selection.samplesPerTask).map(({ task, sample }) =>
    rolloutIdFor(selection.batchId, task, sample),
  );
}

/**
 * The batch of a training iteration's rollouts, which its policy version is trained on (retention
 * keeps it: see src/retention/).
 */
export function iterationBatchId(runId: string, iteration: number): string {
  return `${runId}.it${iteration}`;
}

/**
 * Why a batch's rollout ids would break the rule, checked before anything is launched (one
 * unusable id used to stop a batch halfway): the batch id itself, and every task whose longest
 * id (its last sample) is too long. Empty when all are fine.
 */
export function batchRolloutIdProblems(batchId: string, taskIds: readonly string[], samplesPerTask: number): string[] {
  if (!/^[A-Za-z0-9][A-Za-z0-9._:-]*$/.test(batchId))
    return [`batch id "${batchId}" may hold letters, digits and . _ : - only`];
  const lastSample = Math.max(0, samplesPerTask - 1);
  const tooLong = taskIds.filter((taskId) => rolloutIdFor(batchId, taskId, lastSample).length > ROLLOUT_ID_MAX_LENGTH);
  if (tooLong.length === 0) return [];
  const shown = tooLong
    .slice(0, 3)
    .map((id) => `"${id}"`)
    .join(', ');
  const more = tooLong.length > 3 ? ` and ${tooLong.length - 3} more` : '';
  return [
    `rollout ids "<batch id>.<task id>.<sample>" may be at most ${ROLLOUT_ID_MAX_LENGTH} characters; with batch id "${batchId}" (${batchId.length} characters) the task ids ${shown}${more} make them longer (e.g. "${rolloutIdFor(batchId, tooLong[0] ?? '', lastSample)}"): shorten the batch id or those task ids`,
  ];
}
