/**
 * A version's held-out replay depends only on the version, the config and the harness (rollout
 * ids add the task and sample), so it is done once: a candidate's replay is reused when it is the
 * incumbent of the next gate, and the run's starting replay by its first gate. The harness's
 * version (harnessVersion: its spec, Job template and declared version) is in the id, so runs with
 * different harnesses never share a replay; ids made before it was (no harnessVersion) stay as
 * they were.
 */
export function heldoutBatchId(version: string, configHash: string, harnessVersion?: string): string {
  return `heldout.${version}.${configHash.slice(0, 12)}${harnessPart(harnessVersion)}`;
}

/** The same candidate, incumbent, config, harness and tasks make the same evidence, so the same decision. */
export function decisionIdFor(
  candidate: string,
  incumbent: string,
  configHash: string,
  tasks: number,
  samplesPerTask: number,
  harnessVersion?: string,
): string {
  return `${candidate}.vs.${incumbent}.${configHash.slice(0, 12)}${harnessPart(harnessVersion)}.${tasks}x${samplesPerTask}`;
}

/** `.h-` and the first 8 hex digits of the harness version (h-<16 hex>), or nothing without one. */
const harnessPart = (harnessVersion: string | undefined): string =>
  harnessVersion === undefined ? '' : `.${harnessVersion.slice(0, 10)}`;
