import type { ArtifactStore } from '../src/artifacts/artifact-store.js';
import { curriculumTaskIds, validationTaskIds } from '../src/environments/curriculum.js';
import { EnvironmentLoadError, loadEnvironment, type LoadedEnvironment } from '../src/environments/load.js';
import type { WeaknessKind } from '../src/environments/rigger-evidence.js';
import { rolloutEvidence } from '../src/environments/rollout-evidence.js';
import {
  rig,
  runVariants,
  variantUse,
  type RiggerLlmSummary,
  type RunVariant,
  type VariantOrigin,
  type VariantUse,
} from '../src/environments/run-variants.js';
import { variesEnvironment, type EnvironmentSettings } from '../src/environments/settings.js';
import { validateVariant, validationRecord, type ValidationRecord } from '../src/environments/validation.js';
import type { VariantSpec } from '../src/environments/variant-spec.js';
import { readRolloutFacts } from '../src/gate/rollout-facts.js';
import { refusalRegExps } from '../src/rollouts/failure-class.js';
import { isUnscored } from '../src/rollouts/rollout.js';
import { selectionRolloutIds, type RolloutSelection } from '../src/rollouts/rollout-id.js';
import type { TraceStore } from '../src/store/trace-store.js';
import type { GatewayControlClient } from '../src/gateway/control-client.js';
import { RolloutSetupFailure } from '../workflows/failures.js';
import { runDepsFor, type RunDepsSource } from './run-deps.js';
import { riggerLlm } from './rigger-llm.js';
import { readRecord, recordOnce, riggerReports, variantRecords, windowEvidence } from './variant-records.js';

export interface EnvironmentActivityDeps {
  runs: RunDepsSource;
  store: TraceStore;
  artifacts: ArtifactStore;
  /** What the rigger's LLM is asked through (environment.rigger.llm). */
  gateway?: GatewayControlClient;
}

/** An iteration's plan for the run's variants: the candidates' validation sets, and its training tasks. */
export interface VariantPlan {
  /** Variants not judged yet in this run (declared, or the rigger's), each on its validation tasks. */
  validation: Array<{ variant: string; taskIds: string[] }>;
  samplesPerTask: number;
  /** The iteration's training tasks with the kept variants mixed in (curriculumTaskIds). */
  trainTaskIds: string[];
  /** The variants kept so far in this run, which the training tasks mix in. */
  kept: KeptVariant[];
  /** The rigger's variants the validation and training sets may run in (declared ones are in the config). */
  proposed: VariantSpec[];
}

/** A kept variant: its label, its id (variantId, which the environment ledger records), and why it exists. */
export interface KeptVariant {
  name: string;
  id: string;
  origin: VariantOrigin;
  why: string;
}

/** One variant's verdict, as the iteration's result carries it (the full record is in the artifact store). */
export interface VariantVerdict {
  name: string;
  id: string;
  origin: VariantOrigin;
  kept: boolean;
  reason: string;
  uri: string;
  /** What it changes, in words, and why it exists (declared, or the rigger's reason). */
  changes: string;
  why: string;
  /** Its check: rollouts run, scored, and solved (validation.ts). */
  samples: number;
  scored: number;
  solved: number;
  /** Its validation tasks, whose rollouts the environment ledger's row reads. */
  taskIds: string[];
}

/** What the rigger found after an iteration, as its result carries it (the full report: `uri`). */
export interface RiggerSummary {
  window: number[];
  weaknesses: Array<{ kind: WeaknessKind; subject: string; detail: string; share: number }>;
  proposals: Array<{
    name: string;
    id: string;
    why: string;
    aimedAt: { kind: WeaknessKind; subject: string };
    by: 'rules' | 'llm';
  }>;
  unaddressed: Array<{ kind: WeaknessKind; subject: string; why: string }>;
  /** When the LLM was asked: its model, the rollout its call is journaled under, and how its answer fared. */
  llm?: RiggerLlmSummary;
  uri: string;
}

/** Which iteration, of which run, plans with which training tasks. */
interface IterationTasks {
  runId: string;
  configHash: string;
  iteration: number;
  taskIds: string[];
}

export function createEnvironmentActivities(deps: EnvironmentActivityDeps) {
  const judged = (input: IterationTasks) => runVariantState(deps, input);
  return {
    /** The run's variants this iteration: which still need checking, and the training tasks with the kept ones. */
    async planVariants(input: IterationTasks): Promise<VariantPlan | null> {
      const state = await judged(input);
      if (!state) return null;
      const candidates = state.verdicts.filter((v) => v.verdict === null).map((v) => v.variant);
      const keptSoFar = state.verdicts.filter((v) => v.verdict?.kept).map((v) => v.variant);
      const kept = keptSoFar.map(keptVariant);
      const { samples, tasks } = state.settings.validation;
      return {
        validation: validationTaskIds(
          input.taskIds,
          candidates.map((v) => v.spec.name),
          tasks,
        ),
        samplesPerTask: samples,
        trainTaskIds: state.mixed(kept.map((k) => k.name)),
        kept,
        proposed: [...candidates, ...keptSoFar].filter((v) => v.origin === 'rigger').map((v) => v.spec),
      };
    },

    /**
     * Judges each candidate from its validation rollouts (solvable by some sample, not solved by
     * every one) and records each verdict in the artifact store (a verdict already recorded, a
     * retry's, stands); answers the verdicts and the training tasks with every kept variant.
     */
    keepVariants: (input: KeepInput) => keepVariants(deps, input),

    /**
     * After the iteration's training rollouts: how they did in each environment (the original and
     * each variant used), kept as the rigger's evidence, and the rigger's turn — the weaknesses in
     * the last `rigger.window` iterations and the variants it proposes against them, which the
     * next iteration checks like declared ones.
     */
    assessVariants: (input: AssessInput) => assessVariants(deps, input),
  };
}

type KeepInput = IterationTasks & { batchId: string; samplesPerTask: number; validation: VariantPlan['validation'] };
type AssessInput = IterationTasks & { batchId: string; samplesPerTask: number };

async function keepVariants(
  deps: EnvironmentActivityDeps,
  input: KeepInput,
): Promise<{ verdicts: VariantVerdict[]; trainTaskIds: string[]; kept: KeptVariant[] }> {
  const state = await runVariantState(deps, input);
  if (!state) throw new RolloutSetupFailure(`run config ${input.configHash} has no environment variants`);
  const verdicts: VariantVerdict[] = [];
  for (const { variant: name, taskIds } of input.validation) {
    const variant = state.verdicts.find((v) => v.variant.spec.name === name)?.variant;
    if (!variant) continue; // no longer declared: nothing to keep
    const selection: RolloutSelection = { batchId: input.batchId, taskIds, samplesPerTask: input.samplesPerTask };
    const { record, uri } = await recordOnce(
      deps.artifacts,
      variantRecords.verdict(input.runId, variant.id),
      async () => {
        const results = (await readRolloutFacts(deps.store, selectionRolloutIds(selection))).map((f) => ({
          taskId: f.taskId,
          sample: f.sample,
          success: isUnscored(f) || f.reward === null ? null : f.reward >= state.acceptReward ? 1 : 0,
        }));
        return validationRecord(variant, state.environment.id, validateVariant(results), new Date());
      },
    );
    verdicts.push({
      name,
      id: variant.id,
      origin: variant.origin,
      kept: record.kept,
      reason: record.reason,
      uri,
      changes: record.changes,
      why: variant.why,
      samples: record.samples,
      scored: record.scored,
      solved: record.solved,
      taskIds,
    });
  }
  const kept = state.verdicts
    .filter((v) => v.verdict?.kept || verdicts.some((n) => n.id === v.variant.id && n.kept))
    .map(({ variant }) => keptVariant(variant));
  return { verdicts, trainTaskIds: state.mixed(kept.map((k) => k.name)), kept };
}

async function assessVariants(
  deps: EnvironmentActivityDeps,
  input: AssessInput,
): Promise<{ used: VariantUse[]; rigger: RiggerSummary | null }> {
  const state = await runVariantState(deps, input);
  if (!state) throw new RolloutSetupFailure(`run config ${input.configHash} has no environment variants`);
  const { runId, iteration } = input;
  const selection: RolloutSelection = {
    batchId: input.batchId,
    taskIds: input.taskIds,
    samplesPerTask: input.samplesPerTask,
  };
  const { record: evidence } = await recordOnce(deps.artifacts, variantRecords.evidence(runId, iteration), async () =>
    rolloutEvidence(
      await journaled(deps.store, selectionRolloutIds(selection)),
      iteration,
      state.acceptReward,
      state.refusalPatterns,
    ),
  );
  const used = variantUse(evidence, state.variants);
  const { rigger } = state.settings;
  if (rigger.proposals === 0) return { used, rigger: null };
  const window = await windowEvidence(deps.artifacts, runId, Math.max(1, iteration - rigger.window + 1), iteration - 1);
  const llm = rigger.llm && riggerLlm(deps.gateway, rigger.llm, runId, iteration);
  const { record: report, uri } = await recordOnce(deps.artifacts, variantRecords.report(runId, iteration), () =>
    rig(state.environment, rigger, iteration, [...window, ...evidence], state.variants, llm),
  );
  await llm?.finish(report.llm && (report.llm.error === undefined ? {} : { error: report.llm.error }));
  return {
    used,
    rigger: {
      window: report.window,
      weaknesses: report.weaknesses.map(({ kind, subject, detail, share }) => ({ kind, subject, detail, share })),
      proposals: report.proposals.map((p) => ({
        name: p.spec.name,
        id: p.id,
        why: p.why,
        aimedAt: p.aimedAt,
        by: p.by,
      })),
      unaddressed: report.unaddressed,
      ...(report.llm && {
        llm: {
          model: report.llm.model,
          rolloutId: report.llm.rolloutId,
          proposed: report.llm.proposed,
          refused: report.llm.refused.length,
          ...(report.llm.error !== undefined && { error: report.llm.error }),
        },
      }),
      uri,
    },
  };
}

const keptVariant = (variant: RunVariant): KeptVariant => ({
  name: variant.spec.name,
  id: variant.id,
  origin: variant.origin,
  why: variant.why,
});

/**
 * The run's variants as they stand before `input.iteration`: the declared ones and the rigger's
 * proposals after earlier iterations, each with its verdict if judged; null when the run's
 * environment does not vary.
 */
async function runVariantState(deps: EnvironmentActivityDeps, input: IterationTasks) {
  const run = await runDepsFor(deps.runs, input.configHash);
  const settings = run.environment;
  if (!settings || !variesEnvironment(settings)) return null;
  const environment = await environmentOf(settings);
  const reports = await riggerReports(deps.artifacts, input.runId, input.iteration - 1);
  const variants = runVariants(environment.id, settings.variants, reports);
  const verdicts = await Promise.all(
    variants.map(async (variant) => ({
      variant,
      verdict: await readRecord<ValidationRecord>(deps.artifacts, variantRecords.verdict(input.runId, variant.id)),
    })),
  );
  const mixed = (kept: string[]) => curriculumTaskIds(input.taskIds, kept, settings.curriculum.share, input.iteration);
  return {
    settings,
    environment,
    variants,
    verdicts,
    mixed,
    acceptReward: run.gate.acceptReward,
    refusalPatterns: refusalRegExps(run.rollouts.refusalPatterns),
  };
}

/** The run's environment; a module that cannot be used fails for good. */
async function environmentOf(settings: EnvironmentSettings): Promise<LoadedEnvironment> {
  try {
    return await loadEnvironment(settings.module);
  } catch (err) {
    if (err instanceof EnvironmentLoadError) throw new RolloutSetupFailure(err.message, { problems: [err.message] });
    throw err;
  }
}

/** Finished rollouts with their events, as the rigger's evidence reads them (a rollout never made is left out). */
async function journaled(store: TraceStore, ids: readonly string[]) {
  const found = [];
  for (const id of ids) {
    const rollout = await store.getRollout(id);
    if (!rollout) continue;
    const [events, calls] = await Promise.all([store.listEvents(id), store.listCalls(id, rollout.attempts)]);
    found.push({ rollout, events, ...(calls.length > 0 && { lastCall: calls.at(-1) }) });
  }
  return found;
}
