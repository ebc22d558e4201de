import type { IterationVariantsView } from '../api/variant-schemas.js';
import type { IterationWorkflow } from '../client/iterations.js';
import type { RunReport } from '../client/runs.js';
import { variantsView } from '../environments/variants-view.js';
import type { GateComparison } from '../gate/gate.js';
import type { LedgerEntry } from '../ledger/ledger.js';
import type { PolicyRecord, StoredDecision } from '../registry/policy-registry.js';
import type { LogprobAgreement } from '../samples/token-logprobs.js';

/** Trainer metrics the run page plots, as the trainers report them. */
export const TRAINER_METRICS = ['loss', 'approxKl', 'clipFraction', 'entropy', 'gradNorm'] as const;

type IterationGate = NonNullable<NonNullable<RunReport['status']>['iterations'][number]['gate']>;

/** Everything the run page shows about one iteration, from the run, its workflows, the registry and the ledger. */
export interface IterationView {
  iteration: number;
  candidate: string | null;
  execution: string | null;
  failed: string | null;
  /** Mean verifier reward of the iteration's training rollouts. */
  meanReward: number | null;
  /**
   * Held-out accepted rates over the gate's scored pairs; the interval is production's rate plus the gate's interval on
   * the gain.
   */
  heldout: {
    candidate: number | null;
    production: number | null;
    lower: number | null;
    upper: number | null;
    incumbent: string | null;
    meanReward: number | null;
  };
  trainer: Record<(typeof TRAINER_METRICS)[number], number | null>;
  /** Each optimizer step's metrics, in order (the trainers' stepMetrics); empty where not recorded. */
  trainerSteps: TrainerStep[];
  /** How far the trainer's log-probs of the parent were from the behaviour ones; null where not recorded. */
  trainerLogprobs: LogprobAgreement | null;
  tokens: { rollouts: number | null; trained: number | null };
  stageSeconds: Record<string, number>;
  /** The version the training rollouts sampled from, and the rollouts trained on by versions behind. */
  samples: { sampledFrom: string | null; keptByVersionsBehind: Record<string, number> };
  failures: { train: Record<string, number>; heldout: Record<string, number> };
  /** One failed rollout's reason per failure class, as the sets' summaries keep them. */
  failureReasons?: { train: Record<string, string>; heldout: Record<string, string> };
  gate: IterationGate | null;
  workflows: Array<{ label: string; workflowId: string; executionRunId: string; url: string | null }>;
  /** Where training ran, the variants checked, the rigger's findings; null without an environment. */
  variants: IterationVariantsView | null;
}

export type TrainerStep = Record<(typeof TRAINER_METRICS)[number] | 'tokens' | 'epoch', number>;

export interface RunView {
  runId: string;
  iterations: IterationView[];
  /** Where the run's own workflow is in the Temporal Web UI (when its address is known). */
  workflowUrl: string | null;
}

export interface RunViewSources {
  report: RunReport;
  /** The run's first execution id, for its Web UI link. */
  executionRunId?: string;
  workflows: IterationWorkflow[];
  policies: PolicyRecord[];
  ledger: LedgerEntry[];
  decision(id: string): StoredDecision | undefined;
  /** Links into the Temporal Web UI; null when its address is not known. */
  workflowUrl(workflowId: string, executionRunId: string): string | null;
}

/**
 * Joins what the run reports with its workflows' results, trainer metrics, ledger rows and gate decisions, per
 * iteration.
 */
export function runView(sources: RunViewSources): RunView {
  const { report, workflows } = sources;
  const reported = report.status?.iterations ?? [];
  const numbers = [...new Set([...reported.map((i) => i.iteration), ...workflows.map((w) => w.iteration)])].sort(
    (a, b) => a - b,
  );
  const iterations = numbers.map((n): IterationView => {
    const summary = reported.find((i) => i.iteration === n);
    const workflow = workflows.find((w) => w.iteration === n);
    const result = workflow?.result;
    const candidate = summary?.candidate ?? result?.candidate ?? null;
    const policy = candidate === null ? undefined : sources.policies.find((p) => p.version === candidate);
    const ledger = sources.ledger.find((e) => e.kind === 'iteration' && e.runId === report.runId && e.iteration === n);
    const gate = summary?.gate ?? null;
    const decision = gate ? sources.decision(gate.decisionId) : undefined;
    const evidence = (decision?.record.evidence ?? {}) as Partial<GateComparison>;
    const production = evidence.acceptedRate?.incumbent ?? null;
    const metric = (name: string) => {
      const value = policy?.trainerMetrics[name];
      return typeof value === 'number' ? value : null;
    };
    const link = (label: string, workflowId: string, executionRunId: string) => ({
      label,
      workflowId,
      executionRunId,
      url: sources.workflowUrl(workflowId, executionRunId),
    });
    return {
      iteration: n,
      candidate,
      execution: workflow?.execution ?? null,
      failed: summary?.failed ?? null,
      meanReward: summary?.meanReward ?? result?.rollouts.meanReward ?? null,
      heldout: {
        candidate: evidence.acceptedRate?.candidate ?? null,
        production,
        lower:
          production !== null && evidence.gain?.lower !== undefined ? clamp01(production + evidence.gain.lower) : null,
        upper:
          production !== null && evidence.gain?.upper !== undefined ? clamp01(production + evidence.gain.upper) : null,
        incumbent: gate?.incumbent ?? null,
        meanReward: summary?.heldoutMeanReward ?? null,
      },
      trainer: Object.fromEntries(TRAINER_METRICS.map((m) => [m, metric(m)])) as IterationView['trainer'],
      trainerSteps: trainerStepsOf(policy?.trainerMetrics.stepMetrics),
      trainerLogprobs: logprobAgreementOf(policy?.trainerMetrics.trainerLogprobs),
      tokens: { rollouts: ledger?.metrics.tokens ?? null, trained: result?.batch.trainedTokens ?? null },
      stageSeconds: workflow?.stageSeconds ?? {},
      samples: {
        sampledFrom: summary?.samples?.sampledFrom ?? result?.sampledFrom ?? null,
        keptByVersionsBehind: summary?.samples?.keptByVersionsBehind ?? result?.batch.keptByVersionsBehind ?? {},
      },
      failures: { train: result?.rollouts.byFailureClass ?? {}, heldout: result?.heldout?.byFailureClass ?? {} },
      failureReasons: {
        train: result?.rollouts.failureReasons ?? {},
        heldout: result?.heldout?.failureReasons ?? {},
      },
      gate,
      workflows: workflow
        ? [
            link(`iteration ${n}`, workflow.workflowId, workflow.executionRunId),
            ...(workflow.release
              ? [link(`iteration ${n} release`, workflow.release.workflowId, workflow.release.executionRunId)]
              : []),
          ]
        : [],
      variants: result?.variants ? variantsView(result.variants) : null,
    };
  });
  return {
    runId: report.runId,
    iterations,
    workflowUrl: sources.executionRunId ? sources.workflowUrl(report.runId, sources.executionRunId) : null,
  };
}

const STEP_FIELDS = [...TRAINER_METRICS, 'tokens', 'epoch'] as const;

/** The registry's stepMetrics as recorded (JSON of either trainer); entries missing a number are left out. */
function trainerStepsOf(recorded: unknown): TrainerStep[] {
  if (!Array.isArray(recorded)) return [];
  return recorded
    .filter(
      (s): s is TrainerStep =>
        typeof s === 'object' &&
        s !== null &&
        STEP_FIELDS.every((f) => typeof (s as Record<string, unknown>)[f] === 'number'),
    )
    .map((s) => Object.fromEntries(STEP_FIELDS.map((f) => [f, s[f]])) as TrainerStep);
}

function logprobAgreementOf(recorded: unknown): LogprobAgreement | null {
  if (typeof recorded !== 'object' || recorded === null) return null;
  const { tokens, meanAbsDiff, maxAbsDiff } = recorded as Record<string, unknown>;
  return typeof tokens === 'number' && typeof meanAbsDiff === 'number' && typeof maxAbsDiff === 'number'
    ? { tokens, meanAbsDiff, maxAbsDiff }
    : null;
}

const clamp01 = (x: number) => Math.min(1, Math.max(0, x));
