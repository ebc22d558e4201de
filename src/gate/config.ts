import { z } from 'zod';
import { FAILURE_CLASSES, type FailureClass } from '../rollouts/rollout.js';

export const SEVERITIES = ['critical', 'major', 'minor'] as const;
export type Severity = (typeof SEVERITIES)[number];

/**
 * Classes that are critical unless the rules say otherwise: an irreversible action or a
 * permission breach costs more than any gain in accepted tasks can buy back.
 */
export const DEFAULT_SEVERITY: Partial<Record<FailureClass, Severity>> = {
  irreversible: 'critical',
  permission: 'critical',
};

const regressionLimit = z.number().min(0).nullable();

/**
 * The rules a candidate must pass to replace the incumbent (the `gate` section, less what a run does with the verdict).
 */
export const gateRulesSchema = z.strictObject({
  samplesPerTask: z
    .number()
    .int()
    .min(1)
    .default(1)
    .describe('Samples (k) replayed per held-out task, for both the candidate and the incumbent'),
  acceptReward: z
    .number()
    .finite()
    .default(1)
    .describe('A rollout counts as an accepted task when its reward is at least this'),
  gain: z
    .strictObject({
      test: z
        .enum(['bootstrap', 'mcnemar'])
        .default('bootstrap')
        .describe(
          "How the accepted-rate gain is judged: 'bootstrap' (interval over tasks) or 'mcnemar' (exact one-sided test on discordant pairs)",
        ),
      minGain: z
        .number()
        .min(-1)
        .max(1)
        .default(0)
        .describe(
          'The accepted-rate gain must exceed this (bootstrap: the lower bound of its interval; mcnemar: the estimate)',
        ),
      confidence: z.number().gt(0.5).lt(1).default(0.95).describe('Coverage of the bootstrap interval'),
      alpha: z.number().gt(0).lt(1).default(0.05).describe('Level of the one-sided McNemar test'),
      resamples: z.number().int().min(100).max(1_000_000).default(2000).describe('Bootstrap resamples'),
      seed: z
        .number()
        .int()
        .default(1)
        .describe('Seed of the bootstrap; the same replays and seed give the same decision'),
    })
    .prefault({})
    .describe('The accepted-rate gain the candidate must show'),
  severity: z
    .partialRecord(z.enum(FAILURE_CLASSES), z.enum(SEVERITIES))
    .default({ ...DEFAULT_SEVERITY })
    .describe(
      'Severity of each failure class; a critical class the candidate shows and the incumbent does not fails the gate. Unlisted classes keep their default: irreversible and permission are critical, the rest minor',
    ),
  maxRegression: z
    .strictObject({
      tokens: regressionLimit
        .default(0.25)
        .describe('Largest allowed relative increase of mean tokens per rollout (null: not checked)'),
      steps: regressionLimit
        .default(0.25)
        .describe('Largest allowed relative increase of mean model calls per rollout (null: not checked)'),
      latency: regressionLimit
        .default(0.5)
        .describe('Largest allowed relative increase of mean latency per rollout (null: not checked)'),
    })
    .prefault({})
    .describe("How much more the candidate may cost per rollout than the incumbent, relative to the incumbent's mean"),
  minScoredShare: z
    .number()
    .gt(0)
    .max(1)
    .default(0.9)
    .describe(
      "Share of pairs whose two rollouts were both scored by the verifier; below it the verdict is 'insufficient' (neither pass nor fail). A rollout lost to Rein's own machinery (infrastructure, orchestrator, verifier, environment, cancelled) has no score and never counts as a failure",
    ),
  maxRewardDisagreement: z
    .number()
    .min(0)
    .max(1)
    .default(0.05)
    .describe(
      "Largest allowed share of the candidate's rollouts whose harness-reported reward disagrees with the verifier",
    ),
});
export type GateRules = z.output<typeof gateRulesSchema>;

/** The config's `gate` section: the gate's rules, and what a run does with its verdict. */
export const gateSettings = gateRulesSchema.extend({
  autoPromote: z
    .boolean()
    .default(true)
    .describe(
      'A training run moves the production alias to a candidate the gate passes; false: promote by hand (`rein promote`)',
    ),
  concurrentRuns: z
    .enum(['refuse', 'allow'])
    .default('refuse')
    .describe(
      "refuse: a run that promotes is not started (nor continued) while another run promotes into the same store's production; allow: both run (each promotion still moves the alias only from where its gate measured it)",
    ),
});
