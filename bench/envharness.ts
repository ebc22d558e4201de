/**
 * Environment variants against none, at equal training budget: the calculator example's variants
 * config (examples/calculator-agent/variants.yaml) trained on the embedded default, once as it is
 * and once with `environment.variants` emptied (same module, so both arms' harnesses talk to the
 * environment and their steps are counted alike), the rigger off in both (`--rigger N` lets it
 * propose in the variants arm), per seed (AGENT_SEED), same iterations × tasks ×
 * samples of training rollouts. The variants arm also spends the rollouts that check its variants
 * (`<batch>-validate`): reported beside the budget, not taken from it.
 *
 * Reports, on the original held-out tasks (which both arms replay in the original environment):
 * the gain of what production serves at the end over the base (points, 95% paired bootstrap,
 * tasks resampled), the variants arm's gain minus the plain arm's (seeds pooled by task), tool
 * calls per solved task, the share of failures that are give-ups, which variants each run kept,
 * and the share of training rollouts run in variants.
 *
 *   npm run bench:envharness [-- --seeds 3 --iterations 2 --tasks 12 --samples 8 --heldout 64
 *                                --heldout-every 2 --rigger 0 --arms plain,variants]
 */
import { rmSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { RunStatus } from '../workflows/index.js';
import { embeddedTrainingRun } from './embedded-run.js';
import { readRunEvidence, type RunEvidence } from './envharness-journal.js';
import {
  armGain,
  gainDifference,
  stepsAndGiveUps,
  successPercent,
  typicalSteps,
  type Gain,
} from './envharness-measures.js';
import { printTable } from './envharness-table.js';

const { values } = parseArgs({
  options: {
    seeds: { type: 'string', default: '3' },
    iterations: { type: 'string', default: '2' },
    tasks: { type: 'string', default: '12' },
    samples: { type: 'string', default: '8' },
    heldout: { type: 'string', default: '64' },
    'heldout-every': { type: 'string' },
    concurrency: { type: 'string' },
    /** One arm alone (to time it), or both (the comparison). */
    arms: { type: 'string', default: 'plain,variants' },
    /** Variants the rigger may propose per iteration in the variants arm (environment.rigger.proposals). */
    rigger: { type: 'string', default: '0' },
  },
});
const arms = (values.arms ?? '').split(',').map((a) => a.trim());
if (arms.length === 0 || arms.some((a) => a !== 'plain' && a !== 'variants'))
  throw new Error(`--arms takes plain, variants or both (plain,variants), got "${values.arms ?? ''}"`);
const settings = {
  seeds: Number(values.seeds),
  iterations: Number(values.iterations),
  tasks: Number(values.tasks),
  samples: Number(values.samples),
  heldout: Number(values.heldout),
  // By default the base and the last candidate only: the gate then decides once, at the end.
  heldoutEvery: values['heldout-every'] === undefined ? Number(values.iterations) : Number(values['heldout-every']),
  concurrency: values.concurrency === undefined ? undefined : Number(values.concurrency),
  rigger: Number(values.rigger),
};
for (const [name, value] of Object.entries(settings)) {
  const least = name === 'rigger' ? 0 : 1;
  if (value !== undefined && !(Number.isInteger(value) && value >= least))
    throw new Error(
      `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} must be an integer ≥ ${least}, got ${String(value)}`,
    );
}

export type Arm = 'plain' | 'variants';

export interface ArmRun {
  arm: Arm;
  seed: number;
  wallSeconds: number;
  baseVersion: string;
  finalVersion: string;
  /** The last candidate's held-out success (%), whether or not the gate promoted it. */
  latest: { version: string; success: number } | null;
  gates: string[];
  evidence: RunEvidence;
}

const percentSolved = (byTask: Record<string, number>) => {
  const rewards = Object.values(byTask);
  return Math.round((1000 * rewards.filter((r) => r > 0).length) / Math.max(1, rewards.length)) / 10;
};

/** One arm's training run, then its journal read and its scratch directory removed. */
async function armRun(arm: Arm, seed: number): Promise<ArmRun> {
  const run = await embeddedTrainingRun({
    configFile: 'variants.yaml',
    // The rigger off in the plain arm, and in the variants arm unless asked for: the declared variants are measured.
    environment:
      arm === 'plain' ? { variants: [], rigger: { proposals: 0 } } : { rigger: { proposals: settings.rigger } },
    iterations: settings.iterations,
    tasks: settings.tasks,
    samples: settings.samples,
    heldoutLimit: settings.heldout,
    heldoutEvery: settings.heldoutEvery,
    concurrency: settings.concurrency,
    agentSeed: String(seed),
  });
  try {
    await run.close({ keep: true });
    const status = run.report.status as RunStatus | undefined;
    const base = status?.heldout?.base;
    const latest = status?.heldout?.latest ?? null;
    const final = status?.heldout?.production ?? latest;
    if (!status || !base || !final)
      throw new Error(`the ${arm} run (seed ${seed}) replayed no held-out tasks: ${JSON.stringify(run.report)}`);
    return {
      arm,
      seed,
      wallSeconds: Math.round(run.seconds * 10) / 10,
      baseVersion: base.policyVersion,
      finalVersion: final.policyVersion,
      latest: latest && { version: latest.policyVersion, success: percentSolved(latest.meanRewardByTask) },
      gates: status.iterations.map((i) => `${i.candidate ?? '-'}:${i.gate?.verdict ?? 'none'}`),
      evidence: await readRunEvidence(run.config, run.runId, base.policyVersion, final.policyVersion),
    };
  } finally {
    rmSync(run.workDir, { recursive: true, force: true });
  }
}

const started = performance.now();
const runs: ArmRun[] = [];
for (let seed = 1; seed <= settings.seeds; seed++) {
  // Alternating which arm goes first, so a load that drifts over the bench falls on both alike.
  const order: Arm[] = seed % 2 === 1 ? ['plain', 'variants'] : ['variants', 'plain'];
  for (const arm of order.filter((a) => arms.includes(a))) runs.push(await armRun(arm, seed));
}

const typical = typicalSteps(runs.flatMap((r) => [...r.evidence.base, ...r.evidence.final]));
const runOf = (arm: Arm, seed: number) => runs.find((r) => r.arm === arm && r.seed === seed)!;
const seeds = [...new Set(runs.map((r) => r.seed))];

/** What one run shows. */
function runSummary(run: ArmRun) {
  const { evidence } = run;
  const names = new Map(evidence.verdicts.map((v) => [v.id, v.name]));
  return {
    arm: run.arm,
    seed: run.seed,
    wallSeconds: run.wallSeconds,
    production: run.finalVersion,
    latestCandidate: run.latest,
    gates: run.gates,
    heldoutSuccess: { base: successPercent(evidence.base), final: successPercent(evidence.final) },
    gain: armGain([evidence]),
    final: stepsAndGiveUps(evidence.final, typical),
    base: stepsAndGiveUps(evidence.base, typical),
    kept: evidence.verdicts.filter((v) => v.kept).map((v) => v.name),
    rejected: evidence.verdicts.filter((v) => !v.kept).map((v) => `${v.name} (${v.reason})`),
    trainingRollouts: evidence.training.rollouts,
    validationRollouts: evidence.validationRollouts,
    trainingInVariants: evidence.training.inVariants,
    trainingByVariant: Object.fromEntries(
      Object.entries(evidence.training.byVariant).map(([id, n]) => [names.get(id) ?? id, n]),
    ),
  };
}

/** An arm over all seeds: its gain with tasks resampled (each task's pairs from every seed together). */
function pooled(arm: Arm) {
  const armRuns = runs.filter((r) => r.arm === arm);
  const training = armRuns.reduce((n, r) => n + r.evidence.training.rollouts, 0);
  const inVariants = armRuns.reduce((n, r) => n + r.evidence.training.inVariants, 0);
  return {
    gain: armGain(armRuns.map((r) => r.evidence)),
    final: stepsAndGiveUps(
      armRuns.flatMap((r) => r.evidence.final),
      typical,
    ),
    trainingRollouts: training,
    validationRollouts: armRuns.reduce((n, r) => n + r.evidence.validationRollouts, 0),
    trainingShareInVariants: training === 0 ? 0 : Math.round((100 * inVariants) / training) / 100,
  };
}

/** The variants arm's gain minus the plain arm's over the given seeds; null with one arm. */
const difference = (of: number[]): Gain | null =>
  arms.length < 2
    ? null
    : gainDifference(of.map((s) => ({ plain: runOf('plain', s).evidence, variants: runOf('variants', s).evidence })));

const summary = {
  cpus: os.cpus().length,
  settings,
  budget: {
    trainingRolloutsPerRun: settings.iterations * settings.tasks * settings.samples,
    validation: "the variants arm's variant checks are spent beside the training budget, not taken from it",
  },
  steps: 'tool calls per solved held-out rollout, from its environment event (the harness talks to the environment)',
  giveUps:
    "isGiveUp over the final replay's failures: answered = the last model reply has no tool call and some text; refused = it matches the refusal patterns; typical steps = each task's median tool calls over every solved held-out rollout of the bench",
  wallMinutes: Math.round((performance.now() - started) / 600) / 100,
  runs: runs.map(runSummary),
  pooled: Object.fromEntries(arms.map((arm) => [arm, pooled(arm as Arm)])),
  variantsMinusPlain: {
    bySeed: Object.fromEntries(seeds.map((s) => [s, difference([s])])),
    pooled: difference(seeds),
  },
};
console.log(JSON.stringify(summary, null, 2));
printTable(summary);
