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
