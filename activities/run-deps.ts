import type { EnvironmentSettings } from '../src/environments/settings.js';
import type { GateRules } from '../src/gate/config.js';
import type { RolloutSettings, SampleSettings } from '../src/config/schema.js';
import { RunConfigError } from '../src/config/run-config.js';
import type { HarnessSettings, VerifierSettings } from '../src/rollouts/harness-spec.js';
import { harnessProblems, harnessRefusal } from '../src/rollouts/run-harness-check.js';
import type { ChatTokenizer } from '../src/tokenizer/chat-tokenizer.js';
import { RolloutSetupFailure, RunConfigFailure } from '../workflows/failures.js';

/**
 * What an activity takes from the run it works for, not from the worker: the harness, verifier,
 * rollout rules, sample and gate settings of the run's own config (found by the configHash its
 * workflow carries), with the worker's pacing of rollouts.
 */
export interface RunDeps {
  /** The run's config hash; absent for the worker's own config serving a set started without one. */
  configHash?: string;
  harness?: HarnessSettings;
  verifier?: VerifierSettings;
  /** The environment the harness's tools talk to, when the run has one. */
  environment?: EnvironmentSettings;
  rollouts: RolloutSettings;
  samples: SampleSettings;
  gate: GateRules;
  tokenizer?: ChatTokenizer;
}

/**
 * Where a worker finds a run's deps by its config hash. Undefined asks for the worker's own (a
 * rollout set started by hand, without a run): a run Rein starts always names its config.
 */
export interface RunDepsSource {
  forRun(configHash: string | undefined): Promise<RunDeps>;
}

/** One setup for every run, whatever its hash: for a worker embedded with fixed parts (tests, tools). */
export function fixedRunDeps(deps: Omit<RunDeps, 'configHash'>): RunDepsSource {
  return { forRun: async (configHash) => ({ ...deps, ...(configHash !== undefined && { configHash }) }) };
}

/** The run's deps; a config that cannot be loaded fails for good (RunConfigFailure), saying why and what to do. */
export async function runDepsFor(source: RunDepsSource, configHash: string | undefined): Promise<RunDeps> {
  try {
    return await source.forRun(configHash);
  } catch (err) {
    if (err instanceof RunConfigError) throw new RunConfigFailure(err.message);
    throw err;
  }
}

/**
 * The run's deps for running its rollouts: refused for good (RolloutSetupFailure) when this worker
 * cannot run the run's harness or verifier, naming what is missing and the fix.
 */
export async function runnableRunDeps(
  source: RunDepsSource,
  configHash: string | undefined,
): Promise<RunDeps & { harness: HarnessSettings; verifier: VerifierSettings }> {
  const run = await runDepsFor(source, configHash);
  const problems = harnessProblems(run.harness, run.verifier);
  if (problems.length > 0 || !run.harness || !run.verifier)
    throw new RolloutSetupFailure(harnessRefusal(run.configHash, problems), { problems });
  return { ...run, harness: run.harness, verifier: run.verifier };
}
