import { z } from 'zod';
import { canonicalJson } from '../rollouts/harness-spec.js';
import type { Weakness } from './rigger-evidence.js';
import type { Proposal, RiggedEnvironment } from './rigger-proposals.js';
import { VARIANT_NAME_PATTERN, variantId, variantSchema, type VariantSpec } from './variant-spec.js';

/**
 * The rigger's optional LLM: asked, through the gateway like any harness's model call, for
 * variants aimed at the weaknesses found; its answer is read here and held to the same rules as
 * the rule-based proposals (the variant schema, the environment's own tools and declared states,
 * a weakness it names, nothing already run), and every item refused is kept with the reason.
 * Whatever it proposes is still checked by fresh rollouts before training uses it.
 */
export interface ChatMessage {
  role: 'system' | 'user';
  content: string;
}

/** What the LLM answered, or why there is no answer (the call failed: the rule-based proposals stand alone). */
export type LlmReply = { text: string } | { error: string };

export interface LlmProposals {
  proposals: Proposal[];
  /** Items of the answer not proposed, each shown as the LLM wrote it (cut) with the reason. */
  refused: Array<{ item: string; why: string }>;
}

/** The longest `why` kept from the LLM, and the longest refused item shown. */
const WHY_MAX = 300;
const SHOWN_MAX = 200;

/** An item of the answer: what it aims at and why, beside what it changes (read by variantSchema). */
const answerItemSchema = z.looseObject({
  name: z.unknown().optional(),
  weakness: z.strictObject({ kind: z.string(), subject: z.string() }),
  why: z.string().min(1),
});
/** Where the answer's arrays are looked for: its first few '[' and last few ']' (an answer is short). */
const BRACKETS_TRIED = 16;

/** The messages that ask for at most `max` variants aimed at `found`, in the answer format readLlmProposals reads. */
export function riggerMessages(
  found: readonly Weakness[],
  environment: RiggedEnvironment,
  existing: readonly VariantSpec[],
  max: number,
): ChatMessage[] {
  const lines = [
    `Weaknesses found in the agent's recent training rollouts (kind, subject, detail):`,
    ...found.map((w) => `- ${w.kind} | ${w.subject} | ${w.detail}`),
    '',
    `The environment's tools: ${environment.tools.join(', ')}.`,
    environment.stateParams?.length
      ? `Initial states its vary() accepts ("state" must be one of these exactly): ${environment.stateParams.map(canonicalJson).join('; ')}.`
      : 'It declares no other initial states: propose no "state".',
    existing.length > 0
      ? `Variants that already exist (propose none of these again): ${existing.map((v) => canonicalJson(v)).join('; ')}.`
      : 'No variants exist yet.',
    '',
    `Propose at most ${max} variants, as a JSON array and nothing else. Each item:`,
    '{"name": "short-label", "weakness": {"kind": "<kind>", "subject": "<subject>"}, "why": "<one sentence>",',
    ' "rules"?: {...}, "observations"?: {...}, "state"?: {...}}',
    'rules: transientErrors {every: 2..100, tools?: [tool]}, paging {pageSize: 20..100000},',
    '  strictFormat {tool, argument, pattern, hint}, rateLimit {calls, cooldown}, removeTool {tool, alternative}.',
    'observations: template (containing {observation}), reorder: true, noise {lines: 1..20}, format: "json" | "lines".',
  ];
  return [
    {
      role: 'system',
      content:
        "You design training environments for an AI agent. A variant changes the environment's initial state, " +
        "the rules of its tools or how their output reads, never the task's verifier, so practising in it " +
        'targets a weakness while the task stays the same.',
    },
    { role: 'user', content: lines.join('\n') },
  ];
}

/**
 * The LLM's answer read into proposals (at most `max`, in its order) and refused items. Never
 * throws: an answer that is not a JSON array is one refused item.
 */
export function readLlmProposals(
  text: string,
  found: readonly Weakness[],
  environment: RiggedEnvironment,
  existing: readonly VariantSpec[],
  max: number,
): LlmProposals {
  const items = jsonArrayIn(text);
  if (!items) return { proposals: [], refused: [{ item: shown(text), why: 'the answer holds no JSON array' }] };
  const taken = new Set(existing.map((v) => variantId('llm', v)));
  const names = new Set(existing.map((v) => v.name));
  const result: LlmProposals = { proposals: [], refused: [] };
  for (const item of items) {
    if (result.proposals.length >= max) {
      result.refused.push({ item: shown(item), why: `beyond the ${max} proposals asked for` });
      continue;
    }
    const read = readItem(item, found, environment);
    if (!('variant' in read)) {
      result.refused.push({ item: shown(item), why: read.why });
      continue;
    }
    const id = variantId('llm', read.variant);
    if (taken.has(id)) {
      result.refused.push({ item: shown(item), why: 'a variant that changes the same things exists already' });
      continue;
    }
    taken.add(id);
    const name = read.variant.name && !names.has(read.variant.name) ? read.variant.name : `llm-${id.slice(2, 10)}`;
    names.add(name);
    result.proposals.push({ ...read, variant: { ...read.variant, name } });
  }
  return result;
}

function readItem(
  item: unknown,
  found: readonly Weakness[],
  environment: RiggedEnvironment,
): { variant: VariantSpec; aimedAt: Weakness; why: string } | { why: string } {
  const head = answerItemSchema.safeParse(item);
  if (!head.success) return { why: `not a variant: ${issues(head.error)}` };
  const { weakness, why, name, ...changes } = head.data;
  const parsed = variantSchema.safeParse({ ...changes, name: 'candidate' });
  if (!parsed.success) return { why: `not a variant: ${issues(parsed.error)}` };
  const aimedAt = found.find((w) => w.kind === weakness.kind && w.subject === weakness.subject);
  if (!aimedAt) return { why: `aimed at ${weakness.kind} "${weakness.subject}", which is not a weakness found` };
  const { rules, state } = parsed.data;
  const unknownTool = toolsNamed(rules).find((t) => !environment.tools.includes(t));
  if (unknownTool)
    return { why: `"${unknownTool}" is not one of the environment's tools (${environment.tools.join(', ')})` };
  if (state && !(environment.stateParams ?? []).some((s) => canonicalJson(s) === canonicalJson(state)))
    return { why: `state ${canonicalJson(state)} is not one the environment declares (stateParams)` };
  const label = typeof name === 'string' && VARIANT_NAME_PATTERN.test(name) ? name : '';
  return { variant: { ...parsed.data, name: label }, aimedAt, why: `LLM: ${why.slice(0, WHY_MAX)}` };
}

function toolsNamed(rules: VariantSpec['rules']): string[] {
  if (!rules) return [];
  return [
    ...(rules.transientErrors?.tools ?? []),
    ...(rules.strictFormat ? [rules.strictFormat.tool] : []),
    ...(rules.removeTool ? [rules.removeTool.tool, rules.removeTool.alternative] : []),
  ];
}

/** The first JSON array in the text (bare, or in a fenced block with prose around it); null when none parses. */
function jsonArrayIn(text: string): unknown[] | null {
  const starts = positions(text, '[').slice(0, BRACKETS_TRIED);
  const ends = positions(text, ']').slice(-BRACKETS_TRIED).reverse();
  for (const start of starts) {
    for (const end of ends.filter((e) => e > start)) {
      try {
        const value: unknown = JSON.parse(text.slice(start, end + 1));
        if (Array.isArray(value)) return value;
      } catch {
        // not this span: try a shorter one
      }
    }
  }
  return null;
}

function positions(text: string, char: string): number[] {
  const found: number[] = [];
  for (let i = text.indexOf(char); i !== -1; i = text.indexOf(char, i + 1)) found.push(i);
  return found;
}

const issues = (error: z.ZodError) =>
  error.issues.map((i) => `${i.path.join('.') || '(item)'} ${i.message}`).join('; ');

function shown(value: unknown): string {
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  return text.length > SHOWN_MAX ? `${text.slice(0, SHOWN_MAX)}…` : text;
}
