import { z } from 'zod';
import { DEFAULT_SHARD_SETTINGS } from './shards.js';

/** A regular expression, compiled at check time so `rein config check` finds a broken one, not the first call. */
const regexSource = z
  .string()
  .min(1)
  .superRefine((source, ctx) => {
    try {
      new RegExp(source);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `a valid regular expression (${(err as Error).message})` });
    }
  });

/** The config's `rollouts` section: running the harness on tasks. */
export const rolloutSettings = z.strictObject({
  concurrency: z
    .number()
    .int()
    .min(1)
    .max(10_000)
    .default(16)
    .describe('Harness runs at once (local processes or running Jobs)'),
  launchesPerSecond: z
    .number()
    .positive()
    .max(10_000)
    .optional()
    .describe('The most harness runs started per second (Job creations on Kubernetes); no limit when unset'),
  maxAttempts: z
    .number()
    .int()
    .min(1)
    .max(10)
    .default(2)
    .describe('Attempts per rollout; only infrastructure failures start another'),
  dependencyWaitSeconds: z
    .number()
    .int()
    .min(0)
    .max(86_400)
    .default(300)
    .describe(
      "Before launching, wait (with backoff, shown in the stage's status) while the gateway or the pinned version's backend does not answer; at most this long per set of rollouts, then launches go ahead and fail as infrastructure",
    ),
  hiddenFields: z
    .array(z.string().min(1))
    .default(['answer'])
    .describe('Task fields the harness must not see (the verifier gets the whole task)'),
  rewardWeights: z
    .record(z.string().min(1), z.number().finite())
    .default({ success: 1 })
    .describe("reward = sum of weight x the verifier's component; every component is stored"),
  shard: z
    .strictObject({
      size: z
        .number()
        .int()
        .min(1)
        .max(100_000)
        .default(DEFAULT_SHARD_SETTINGS.size)
        .describe(
          "About this many rollouts per shard (whole tasks only, at least one): a lost worker's shard is retried on another, finished rollouts read back",
        ),
      inFlight: z
        .number()
        .int()
        .min(1)
        .max(1_000)
        .default(DEFAULT_SHARD_SETTINGS.inFlight)
        .describe(
          'Shards of one set running at once, on any workers; each runs ceil(concurrency / inFlight) harnesses, so a set runs about `concurrency` at once however many workers share it',
        ),
    })
    .optional()
    .describe(
      'A set of rollouts larger than one shard fans out over the task queue as shards, so that several workers share it (unset: 64 rollouts a shard, 4 at once)',
    ),
  refusalPatterns: z
    .array(regexSource)
    .optional()
    .describe(
      "Regular expressions (case-insensitive) that mark a model reply as a refusal, for the 'model' failure class; a few common English refusals when unset",
    ),
});
