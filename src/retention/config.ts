import { z } from 'zod';

const UNITS = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;
const DURATION = /^(\d+)\s*([mhdw])$/;
const EXAMPLE = 'a whole number and a unit (m, h, d, w), e.g. "30d", "12h", "2w"';

/** Milliseconds in a retention duration ("30d"); undefined when the text is not one. */
export function durationMs(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (!match) return undefined;
  const ms = Number(match[1]) * UNITS[match[2] as keyof typeof UNITS];
  return ms > 0 && Number.isSafeInteger(ms) ? ms : undefined;
}

/** A duration kept as the text the user wrote (configs are printed back); parsed with durationMs. */
const duration = z.string().superRefine((text, ctx) => {
  if (durationMs(text) === undefined) ctx.addIssue({ code: 'custom', message: `${EXAMPLE}, more than zero` });
});

/**
 * How long Rein keeps what piles up as it runs. Each is unset by default: kept for ever. `rein gc`
 * applies them; it never deletes a rollout a registered policy's batch was built from, one a gate
 * decision cites, an unfinished one, or any of a batch still in use (see src/retention/).
 */
export const retentionSchema = z.strictObject({
  journal: duration
    .optional()
    .describe(
      'Finished rollouts with their calls, shadow calls and events are deleted from the trace store this long after they last changed, e.g. "30d"; unset: kept',
    ),
  rolloutFolders: duration
    .optional()
    .describe(
      'Rollout folders (dataDir/rollouts/<id>: task, harness and verifier logs) and the logs workers uploaded to the artifact store (rollouts/<id>/) are deleted this long after their last write, e.g. "14d"; unset: kept',
    ),
  staging: duration
    .optional()
    .describe(
      'Local copies of remote artifacts (dataDir/staging) and temporary files a dead writer left (dataDir/artifacts, dataDir/staging) are deleted this long after their last write, e.g. "7d"; unset: kept',
    ),
});

export type RetentionSettings = z.output<typeof retentionSchema>;
