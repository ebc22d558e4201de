import { statSync } from 'node:fs';
import { programSpec, type HarnessSettings, type VerifierSettings } from './harness-spec.js';
import { programProblems } from './program.js';

/**
 * Why this machine cannot run a run's harness and verifier as its config gives them: a missing
 * program, working directory or Job template. A run's config names paths as they were on the
 * machine that started it, so a worker elsewhere may lack them. Empty when both can run here.
 */
export function harnessProblems(
  harness: HarnessSettings | undefined,
  verifier: VerifierSettings | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string[] {
  const problems: string[] = [];
  if (!harness) problems.push('harness: not set in the run config');
  else if (harness.local) problems.push(...programProblems('harness', programSpec(harness.local), env));
  else if (harness.kubernetes && !statSync(harness.kubernetes.template, { throwIfNoEntry: false })?.isFile())
    problems.push(`harness.kubernetes.template: ${harness.kubernetes.template} is not a file here`);
  if (!verifier) problems.push('verifier: not set in the run config');
  else problems.push(...programProblems('verifier', programSpec(verifier), env));
  return problems;
}

/** The refusal for a run whose harness this machine cannot run: the problems, and the ways to fix them. */
export function harnessRefusal(configHash: string | undefined, problems: readonly string[]): string {
  const run = configHash === undefined ? "this worker's own config" : `run config ${configHash}`;
  return (
    `this worker cannot run the harness of ${run}: ${problems.join('; ')}. ` +
    "A run's config names its programs and folders as they are on the machine that started it: run the workers " +
    'where those paths exist (the same checkout at the same path), or start the run from a config whose harness and ' +
    'verifier this worker can run'
  );
}
