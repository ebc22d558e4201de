import { ArtifactNotFoundError, type ArtifactStore } from '../src/artifacts/artifact-store.js';
import { curriculumTaskIds, validationTaskIds } from '../src/environments/curriculum.js';
import { EnvironmentLoadError, loadEnvironment, type LoadedEnvironment } from '../src/environments/load.js';
import type { EnvironmentSettings } from '../src/environments/settings.js';
import { validateVariant, validationRecord } from '../src/environments/validation.js';
import { identifiedVariants, type IdentifiedVariant } from '../src/environments/variant-spec.js';
import { readRolloutFacts } from '../src/gate/rollout-facts.js';
import { isUnscored } from '../src/rollouts/rollout.js';
import { selectionRolloutIds, type RolloutSelection } from '../src/rollouts/rollout-id.js';
import type { TraceStore } from '../src/store/trace-store.js';
import { RolloutSetupFailure } from '../workflows/failures.js';
import { runDepsFor, type RunDepsSource } from './run-deps.js';

export interface EnvironmentActivityDeps {
  runs: RunDepsSource;
  store: TraceStore;
  artifacts: ArtifactStore;
}

/** An iteration's plan for the run's variants: the candidates' validation sets, and its training tasks. */
export interface VariantPlan {
  /** Declared variants not judged yet in this run, each on its validation tasks (empty: none to check). */
  validation: Array<{ variant: string; taskIds: string[] }>;
  samplesPerTask: number;
  /** The iteration's training tasks with the kept variants mixed in (curriculumTaskIds). */
  trainTaskIds: string[];
  /** The variants kept so far in this run, which the training tasks mix in. */
  kept: KeptVariant[];
}

/** A kept variant: its label and its id (variantId), which the environment ledger records. */
export interface KeptVariant {
  name: string;
  id: string;
}

/** One variant's verdict, as the iteration's result carries it (the full record is in the artifact store). */
export interface VariantVerdict {
  name: string;
  id: string;
  kept: boolean;
  reason: string;
  uri: string;
}

/** Which iteration, of which run, plans with which training tasks. */
interface IterationTasks {
  runId: string;
  configHash: string;
  iteration: number;
  taskIds: string[];
}

/** Where a run keeps its verdict on a variant: judged once per run, read by every later iteration. */
const verdictName = (runId: string, variant: string) => `runs/${runId}/variants/${variant}.json`;

export function createEnvironmentActivities(deps: EnvironmentActivityDeps) {
  const judged = async (input: IterationTasks) => {
    const run = await runDepsFor(deps.runs, input.configHash);
    if (!run.environment || run.environment.variants.length === 0) return null;
    const { environment, variants } = await variantsOf(run.environment);
    const verdicts = await Promise.all(
      variants.map(async (v) => ({
        variant: v,
        verdict: await readVerdict(deps.artifacts, verdictName(input.runId, v.id)),
      })),
    );
    const mixed = (kept: string[]) =>
      curriculumTaskIds(input.taskIds, kept, run.environment?.curriculum.share ?? 0, input.iteration);
    return { run, settings: run.environment, environment, verdicts, mixed };
  };
  return {
    /** The run's variants this iteration: which still need checking, and the training tasks with the kept ones. */
    async planVariants(input: IterationTasks): Promise<VariantPlan | null> {
      const state = await judged(input);
      if (!state) return null;
      const candidates = state.verdicts.filter((v) => v.verdict === null).map((v) => v.variant.spec.name);
      const kept = state.verdicts.filter((v) => v.verdict?.kept).map(({ variant }) => keptVariant(variant));
      const { samples, tasks } = state.settings.validation;
      return {
        validation: validationTaskIds(input.taskIds, candidates, tasks),
        samplesPerTask: samples,
        trainTaskIds: state.mixed(kept.map((k) => k.name)),
        kept,
      };
    },

    /**
     * Judges each candidate from its validation rollouts (solvable by some sample, not solved by
     * every one) and records each verdict in the artifact store (a verdict already recorded, a
     * retry's, stands); answers the verdicts and the training tasks with every kept variant.
     */
    async keepVariants(
      input: IterationTasks & { batchId: string; samplesPerTask: number; validation: VariantPlan['validation'] },
    ): Promise<{ verdicts: VariantVerdict[]; trainTaskIds: string[]; kept: KeptVariant[] }> {
      const state = await judged(input);
      if (!state) throw new RolloutSetupFailure(`run config ${input.configHash} has no environment variants`);
      const verdicts: VariantVerdict[] = [];
      for (const { variant: name, taskIds } of input.validation) {
        const variant = state.verdicts.find((v) => v.variant.spec.name === name)?.variant;
        if (!variant) continue; // no longer declared: nothing to keep
        const selection: RolloutSelection = { batchId: input.batchId, taskIds, samplesPerTask: input.samplesPerTask };
        const results = (await readRolloutFacts(deps.store, selectionRolloutIds(selection))).map((f) => ({
          taskId: f.taskId,
          sample: f.sample,
          success: isUnscored(f) || f.reward === null ? null : f.reward >= state.run.gate.acceptReward ? 1 : 0,
        }));
        const artifact = verdictName(input.runId, variant.id);
        const recorded = await readVerdict(deps.artifacts, artifact);
        const record =
          recorded ?? validationRecord(variant, state.environment.id, validateVariant(results), new Date());
        const uri = recorded
          ? deps.artifacts.uriOf(artifact)
          : (await deps.artifacts.put(artifact, JSON.stringify(record))).uri;
        verdicts.push({ name, id: variant.id, kept: record.kept, reason: record.reason, uri });
      }
      const kept = state.verdicts
        .filter((v) => v.verdict?.kept || verdicts.some((n) => n.id === v.variant.id && n.kept))
        .map(({ variant }) => keptVariant(variant));
      return { verdicts, trainTaskIds: state.mixed(kept.map((k) => k.name)), kept };
    },
  };
}

const keptVariant = (variant: IdentifiedVariant): KeptVariant => ({ name: variant.spec.name, id: variant.id });

/** The run's environment and its declared variants; a module that cannot be used fails for good. */
async function variantsOf(
  settings: EnvironmentSettings,
): Promise<{ environment: LoadedEnvironment; variants: IdentifiedVariant[] }> {
  try {
    const environment = await loadEnvironment(settings.module);
    return { environment, variants: identifiedVariants(environment.id, settings.variants) };
  } catch (err) {
    if (err instanceof EnvironmentLoadError) throw new RolloutSetupFailure(err.message, { problems: [err.message] });
    throw err;
  }
}

async function readVerdict(artifacts: ArtifactStore, name: string): Promise<{ kept: boolean; reason: string } | null> {
  try {
    return JSON.parse((await artifacts.get(artifacts.uriOf(name))).toString('utf8')) as {
      kept: boolean;
      reason: string;
    };
  } catch (err) {
    if (err instanceof ArtifactNotFoundError) return null;
    throw err;
  }
}
