/** A policy update that did not produce a version. */
export class PolicyUpdateError extends Error {}
/** Retrying cannot help: the setup is wrong (a template, credentials) or the lineage does not hold. */
export class PolicySetupError extends PolicyUpdateError {}
/** The lineage does not hold (unknown parent, a batch that changed). */
export class PolicyLineageError extends PolicySetupError {}
