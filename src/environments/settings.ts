import { z } from 'zod';
import { weaknessOptionsSchema } from './rigger-weaknesses.js';
import { variantSchema } from './variant-spec.js';

/** `environment` in the config: the module a harness's tools talk to, and the variants Rein may run it in. */
export const environmentSchema = z
  .strictObject({
    module: z
      .string()
      .min(1)
      .describe(
        'The environment: a JavaScript module whose default export has reset, step and tools (docs/environments.md), ' +
          'relative to the config file',
      ),
    variants: z
      .array(variantSchema)
      .max(200)
      .default([])
      .superRefine((variants, ctx) => {
        const seen = new Set<string>();
        variants.forEach((v, i) => {
          if (seen.has(v.name))
            ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `variant name "${v.name}" appears twice` });
          seen.add(v.name);
        });
      })
      .describe('Variants of the environment (other states, rules, observations) training may use; never held-out'),
    validation: z
      .strictObject({
        samples: z
          .number()
          .int()
          .min(2)
          .max(64)
          .default(4)
          .describe('Fresh rollouts per task that check a variant before use: some must succeed, not all'),
        tasks: z
          .number()
          .int()
          .min(1)
          .max(64)
          .default(4)
          .describe("Tasks per variant checked (the first of the iteration's training tasks)"),
      })
      .prefault({})
      .describe('How a variant is checked before training uses it, once per run'),
    curriculum: z
      .strictObject({
        share: z
          .number()
          .min(0)
          .max(1)
          .default(0.25)
          .describe(
            "Share of each iteration's training tasks run in a kept variant instead (same rollout budget); " +
              'held-out replay always runs the original environment',
          ),
      })
      .prefault({})
      .describe('How kept variants mix into training'),
    rigger: z
      .strictObject({
        proposals: z
          .number()
          .int()
          .min(0)
          .max(16)
          .default(2)
          .describe(
            'Variants the rigger may propose after each iteration, aimed at the weaknesses it finds in the ' +
              "last iterations' training rollouts, each checked like a declared one before use (0: off)",
          ),
        window: z.number().int().min(1).max(50).default(2).describe('Iterations of training rollouts the rigger reads'),
        thresholds: weaknessOptionsSchema.describe('How much support a weakness needs before the rigger names it'),
        llm: z
          .strictObject({
            model: z
              .string()
              .min(1)
              .max(256)
              .describe('A model name the gateway serves: an alias (production), a policy version or a backend model'),
            maxTokens: z.number().int().min(64).max(8192).default(1024).describe('The longest answer asked for'),
          })
          .optional()
          .describe(
            'Proposals from an LLM too, asked through the gateway with the weaknesses found; its call is journaled ' +
              'under the rollout <run>.rigger.it<n> (mode rigger). Its valid proposals come first, the rule ' +
              "table's fill the rest; what it proposed that breaks the rules is in the rigger's report",
          ),
      })
      .refine((r) => r.llm === undefined || r.proposals > 0, {
        message: 'rigger.llm asks for proposals: set rigger.proposals ≥ 1 too, or remove rigger.llm',
        path: ['llm'],
      })
      .prefault({})
      .describe(
        "The rigger: variants aimed at the policy's recurring weaknesses, rule-based, optionally an LLM's too " +
          '(docs/environments.md)',
      ),
  })
  .describe("The environment the harness's tools talk to (REIN_ENV_URL), and its variants");

export type EnvironmentSettings = z.output<typeof environmentSchema>;

/** Whether a run's iterations plan variants at all: some declared, or a rigger that may propose them. */
export const variesEnvironment = (settings: EnvironmentSettings | undefined): boolean =>
  settings !== undefined && (settings.variants.length > 0 || settings.rigger.proposals > 0);
