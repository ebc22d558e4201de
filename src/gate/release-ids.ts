/**
 * A version's held-out replay depends only on the version and the config (rollout ids add the
 * task and sample), so it is done once: a candidate's replay is reused when it is the incumbent
 * of the next gate, and the run's starting replay by its first gate.
 */
export function heldoutBatchId(version: string, configHash: string): string {
  return `heldout.${version}.${configHash.slice(0, 12)}`;
}

/** The same candidate, incumbent, config and tasks make the same evidence, so the same decision. */
export function decisionIdFor(
  candidate: string,
  incumbent: string,
  configHash: string,
  tasks: number,
  samplesPerTask: number,
): string {
  return `${candidate}.vs.${incumbent}.${configHash.slice(0, 12)}.${tasks}x${samplesPerTask}`;
}
