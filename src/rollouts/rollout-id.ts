/** A rollout's id within its batch: stable, so a batch run again finds its rollouts (and a workflow can name them). */
export function rolloutIdFor(batchId: string, taskId: string, sample: number): string {
  return `${batchId}.${taskId.replace(/[^A-Za-z0-9._:-]/g, '_')}.${sample}`;
}
