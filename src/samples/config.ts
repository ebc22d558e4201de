import { z } from 'zod';
import { ADVANTAGE_ESTIMATORS } from './advantages.js';
import { LOSS_AGGREGATIONS } from './loss-weights.js';
import { MERGE_MODES } from './merge-modes.js';

/**
 * How the trainers correct for a sampler that is not the parent policy (another engine, or an older
 * version under an asynchronous schedule): truncate every token's ratio at `cap`, or also mask the
 * tokens (level token) or whole sequences (level sequence) whose ratio leaves `band`.
 */
const importanceSamplingSettings = z
  .strictObject({
    mode: z
      .enum(['truncate', 'mask'])
      .describe(
        "truncate: each trained token's weight times min(r, cap). mask: as truncate, and weight 0 for the tokens or sequences whose ratio lies outside band",
      ),
    level: z
      .enum(['token', 'sequence'])
      .default('token')
      .describe(
        "What mask mode judges: each token's ratio, or the sequence's (exp of the mean log-ratio of its trained tokens), masking the whole sequence",
      ),
    band: z
      .array(z.number().positive())
      .length(2)
      .optional()
      .describe('[low, high] with low < 1 < high: ratios inside are kept (mask mode only, required there)'),
    cap: z
      .number()
      .positive()
      .optional()
      .describe(
        "Truncation of the kept tokens' ratios (required under truncate; under mask the band's high by default)",
      ),
  })
  .superRefine((s, ctx) => {
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    if (s.mode === 'truncate') {
      if (s.cap === undefined) issue('cap', 'mode truncate needs a cap (e.g. cap: 2)');
      if (s.band !== undefined) issue('band', 'a band applies to mode mask only; set mode: mask or remove band');
      if (s.level === 'sequence')
        issue('level', 'level sequence applies to mode mask only; set mode: mask or level: token');
    } else if (s.band === undefined)
      issue('band', 'mode mask needs band: [low, high] with low < 1 < high (e.g. [0.5, 2])');
    else if (!((s.band[0] as number) < 1 && (s.band[1] as number) > 1))
      issue('band', `band [${s.band.join(', ')}] must hold 1 strictly inside (low < 1 < high), e.g. [0.5, 2]`);
  });

/** The config's `samples` section: how journaled rollouts become a training batch. */
export const sampleSettings = z
  .strictObject({
    merge: z
      .enum(MERGE_MODES)
      .default('exact')
      .describe(
        "How a rollout's calls become training sequences. exact: a call whose prompt ids start with the sequence so far extends it (what the harness inserted masked); for harnesses that send their history back verbatim, where the merge rate is 1.0. tito (token in, token out): the gateway splices the model's own token ids into the earlier assistant turns it recognises and sends token ids to the backend, so frameworks that re-serialise tool-call arguments or drop reasoning still give one sequence; needs a backend that takes token ids; the batch merges as exact. stepwise: each call is its own sample (prompt masked, completion trained), all sharing the rollout's advantage; for harnesses that rewrite their history freely; costs prompt tokens in training (each call's whole prompt is in the batch). The report records what exact merging gives (merge rate, causes) in every mode",
      ),
    estimator: z.enum(ADVANTAGE_ESTIMATORS).default('grpo').describe('Group-relative advantage estimator'),
    zeroVarianceGroups: z.enum(['drop', 'keep']).default('drop').describe('Groups whose rewards are all equal'),
    lossAggregation: z
      .enum(LOSS_AGGREGATIONS)
      .optional()
      .describe(
        'Loss normalization, folded into per-token weights. Unset: token-mean, or rollout-mean under merge stepwise (each rollout counts once, however many calls it made). Under stepwise each call is a sequence, so a seq-* aggregation weighs a rollout by its number of calls',
      ),
    normConstant: z
      .number()
      .positive()
      .optional()
      .describe('C of seq-mean-token-sum-norm (default: maxResponseTokens)'),
    maxPromptTokens: z
      .number()
      .int()
      .positive()
      .default(16_384)
      .describe("Longer first prompts drop the sequence (under merge stepwise: each call's prompt, its step)"),
    maxResponseTokens: z
      .number()
      .int()
      .positive()
      .default(8_192)
      .describe("Sequences are cut this far after their first prompt (under merge stepwise: after each call's prompt)"),
    truncated: z
      .enum(['mask', 'drop', 'zero_reward'])
      .default('mask')
      .describe('A truncated or unfinished rollout gets no outcome reward: masked, dropped, or trained with reward 0'),
    excludedFailureClasses: z
      .array(z.string())
      .default(['infrastructure', 'orchestrator', 'verifier', 'cancelled', 'unfinished'])
      .describe("Rollouts failed for these reasons are not the policy's doing and are left out (counted)"),
    incompleteGroups: z.enum(['keep', 'drop']).default('keep').describe('When some rollouts of a group are left out'),
    maxVersionsBehind: z.number().int().min(0).optional().describe('Leave out rollouts sampled from older policies'),
    importanceWeightCap: z
      .number()
      .positive()
      .optional()
      .describe(
        'Truncated importance weights: the trainer caps pi_trainer / pi_sampler at this value (written into the batch). Shorthand for importanceSampling {mode: truncate, cap}',
      ),
    importanceSampling: importanceSamplingSettings
      .optional()
      .describe(
        "Off-policy correction with the sampler's journaled log-probs, ratio r = pi_parent / pi_sampler per trained token (docs/training-objective.md). Unset: none, or truncate at importanceWeightCap",
      ),
    tokenizerDir: z
      .string()
      .optional()
      .describe(
        "The model's tokenizer.json + tokenizer_config.json, to re-render calls without token ids and measure drift",
      ),
    thresholds: z
      .strictObject({
        maxDriftRate: z
          .number()
          .min(0)
          .max(1)
          .default(0.05)
          .describe('Fail the stage above this share of drifted prompts'),
        minRolloutsUsed: z.number().int().min(0).default(1).describe('Fail the stage with fewer usable rollouts'),
        minScoredShare: z
          .number()
          .min(0)
          .max(1)
          .default(0.8)
          .describe(
            "Fail the stage when a smaller share of the iteration's rollouts was scored (the rest lost to faults: infrastructure, orchestrator, verifier, environment, cancelled): an update from the scraps of a broken iteration is not worth its risk",
          ),
        maxRewardDisagreementRate: z
          .number()
          .min(0)
          .max(1)
          .default(1)
          .describe('Fail above this share of rollouts whose harness-reported reward disagrees with the verifier'),
      })
      .prefault({})
      .describe('Data-quality checks: the batch stage fails (not retried) when one is missed, its report kept'),
  })
  .superRefine((settings, ctx) => {
    if (settings.importanceWeightCap !== undefined && settings.importanceSampling !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['importanceWeightCap'],
        message:
          'importanceWeightCap and importanceSampling are both set; move the cap into importanceSampling.cap and remove importanceWeightCap',
      });
  });
