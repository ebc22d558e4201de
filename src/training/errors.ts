/** A policy update that did not produce a version. */
export class PolicyUpdateError extends Error {}
/** Retrying cannot help: the setup is wrong (a template, credentials) or the lineage does not hold. */
export class PolicySetupError extends PolicyUpdateError {}
/** The lineage does not hold (unknown parent, a batch that changed). */
export class PolicyLineageError extends PolicySetupError {}

/** A trainer's exit codes that are refusals (2: bad input, 3: out of memory): another try would fail the same way. */
export function isTrainerRefusal(exitCode: number | null | undefined): boolean {
  return exitCode === 2 || exitCode === 3;
}
