import { z } from 'zod';

const variantOrigin = z.enum(['declared', 'rigger']);
const weaknessKind = z.string().describe('tool_errors, gives_up, long_episodes, task_failures, format');
/** What an iteration did with the run's environment variants, as a page shows it (the full records: the ledger). */
export const iterationVariants = z.object({
  variantTasks: z.number().int().optional().describe('Training tasks run in a kept variant instead of the original'),
  used: z
    .array(
      z.object({
        name: z.string().describe('"original" for the environment unchanged'),
        id: z.string().nullable().describe("The variant's id; null for the original"),
        origin: z.enum(['original', 'declared', 'rigger']),
        why: z.string(),
        rollouts: z.number().int(),
        scored: z.number().int(),
        solved: z.number().int().describe("Scored rollouts whose reward reached the gate's acceptReward"),
        meanReward: z.number().nullable().describe('Over the scored rollouts; null when none was scored'),
      }),
    )
    .optional()
    .describe('The environments the training rollouts ran in: the original first, then each variant used'),
  verdicts: z
    .array(
      z.object({
        name: z.string(),
        origin: variantOrigin,
        kept: z.boolean(),
        reason: z.string().describe('The verdict in words'),
        why: z.string().describe('Declared in config, or the weakness the rigger aimed it at'),
        changes: z.string().describe('What it changes, in words'),
      }),
    )
    .describe('The variants checked this iteration with fresh rollouts, kept or rejected'),
  rigger: z
    .object({
      weaknesses: z.array(
        z.object({
          kind: weaknessKind,
          subject: z.string(),
          detail: z.string().describe('The evidence, in words'),
          share: z.number(),
        }),
      ),
      proposals: z.array(
        z.object({
          name: z.string(),
          why: z.string(),
          aimedAt: z.object({ kind: weaknessKind, subject: z.string() }),
        }),
      ),
      llm: z
        .object({
          model: z.string(),
          rolloutId: z.string().describe('The rollout (mode rigger) its call is journaled under'),
          proposed: z.number().int(),
          refused: z
            .number()
            .int()
            .describe("Items of its answer refused; each with its reason in the rigger's report"),
          error: z.string().optional().describe('Why there is no answer (the call failed)'),
        })
        .optional()
        .describe('When environment.rigger.llm is set: how the LLM fared'),
    })
    .optional()
    .describe("The rigger's recurring weaknesses after the training rollouts, and the variants it proposed"),
});
export type IterationVariantsView = z.output<typeof iterationVariants>;
