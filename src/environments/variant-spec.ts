import { createHash } from 'node:crypto';
import { z } from 'zod';
import { canonicalJson } from '../rollouts/harness-spec.js';

/**
 * What a variant changes, as declared in the config (`environment.variants`) or proposed by the
 * rigger: the environment's initial state (its own `vary`), its rules (how its tools behave,
 * within the task's contract) and its observations (how tool output reads). Each variant is
 * content-addressed (variantId), so the ledger and every rollout name exactly what ran.
 */
const toolName = z.string().min(1).max(64);

export const rulesSchema = z
  .strictObject({
    transientErrors: z
      .strictObject({
        every: z.number().int().min(2).max(100).describe('Every n-th call fails once; the same call again succeeds'),
        tools: z.array(toolName).optional().describe('Only these tools (default: all)'),
      })
      .optional()
      .describe('Calls that fail with a transient error the harness may retry'),
    paging: z
      .strictObject({
        pageSize: z.number().int().min(20).max(100_000).describe('Characters per page'),
      })
      .optional()
      .describe('Long tool output comes a page at a time; {"page": n} in the arguments asks for page n'),
    strictFormat: z
      .strictObject({
        tool: toolName,
        argument: z.string().min(1).max(64),
        pattern: z.string().min(1).max(500).describe('A regular expression the argument must match whole'),
        hint: z.string().min(1).max(300).describe('What the refusal tells the caller the format is'),
      })
      .optional()
      .describe('A tool that refuses arguments outside a stricter format, saying which'),
    rateLimit: z
      .strictObject({
        calls: z.number().int().min(1).max(1000).describe('Calls in a row before the limit'),
        cooldown: z.number().int().min(1).max(100).describe('Calls refused after them'),
      })
      .optional()
      .describe('Calls refused for a while after a burst'),
    removeTool: z
      .strictObject({ tool: toolName, alternative: toolName })
      .optional()
      .describe('A tool no longer offered; calling it names the alternative left'),
  })
  .describe("How the environment's tools behave (within the task's contract)");

export const observationsSchema = z
  .strictObject({
    template: z
      .string()
      .min(1)
      .max(500)
      .refine((t) => t.includes('{observation}'), 'the template must contain {observation}')
      .optional()
      .describe('Rewords each observation: {observation} is replaced by the tool output'),
    reorder: z.boolean().optional().describe("JSON output's keys and list items in another (seeded) order"),
    noise: z
      .strictObject({ lines: z.number().int().min(1).max(20) })
      .optional()
      .describe('Distractor lines before the output'),
    format: z
      .enum(['json', 'lines'])
      .optional()
      .describe('Plain output as {"result": …}, or JSON objects as key: value lines'),
  })
  .describe('How tool output reads');

/** What a variant's label may be. */
export const VARIANT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export const variantSchema = z
  .strictObject({
    name: z
      .string()
      .regex(VARIANT_NAME_PATTERN, 'letters, digits and . _ - (at most 64)')
      .describe('A label; the variant is identified by what it changes'),
    state: z
      .record(z.string(), z.unknown())
      .optional()
      .describe("Parameters for the environment's own vary(task, params): other initial conditions"),
    rules: rulesSchema.optional(),
    observations: observationsSchema.optional(),
  })
  .refine((v) => v.state !== undefined || v.rules !== undefined || v.observations !== undefined, {
    message: 'a variant changes something: give state, rules or observations',
  });

export type VariantSpec = z.output<typeof variantSchema>;
export type RulesSpec = z.output<typeof rulesSchema>;
export type ObservationsSpec = z.output<typeof observationsSchema>;

const digest = (value: unknown, length: number) =>
  createHash('sha256').update(canonicalJson(value)).digest('hex').slice(0, length);

/** The short content hash of an environment module's bytes: part of its id, and of the URL it is imported by. */
export function moduleHash(moduleBytes: Buffer | string): string {
  return createHash('sha256').update(moduleBytes).digest('hex').slice(0, 12);
}

/** An environment's id: its name, its version and the hash of the module that implements it (moduleHash). */
export function environmentId(name: string, version: string, hash: string): string {
  return `${name}@${version}:${hash}`;
}

/** A variant's id: what it changes, in the environment it changes (its label is not part of it). */
export function variantId(environment: string, variant: VariantSpec): string {
  const { name: _label, ...changes } = variant;
  return `v-${digest({ environment, changes }, 12)}`;
}

/** A variant as the curriculum and the sessions hold it: its id (variantId) and what it changes. */
export interface IdentifiedVariant {
  id: string;
  spec: VariantSpec;
}

/** The declared variants, each with its id in the environment. */
export function identifiedVariants(environment: string, variants: readonly VariantSpec[]): IdentifiedVariant[] {
  return variants.map((spec) => ({ id: variantId(environment, spec), spec }));
}

/** What a variant changed, in words, for the ledger, the run report and the console. */
export function variantSummary(variant: VariantSpec): string {
  const parts: string[] = [];
  if (variant.state) parts.push(`state ${canonicalJson(variant.state)}`);
  for (const [rule, params] of Object.entries(variant.rules ?? {}))
    if (params !== undefined) parts.push(`rules.${rule} ${canonicalJson(params)}`);
  for (const [op, params] of Object.entries(variant.observations ?? {}))
    if (params !== undefined) parts.push(`observations.${op} ${canonicalJson(params)}`);
  return parts.join('; ');
}
