import { toolNames } from './contract.js';
import type { LoadedEnvironment } from './load.js';
import type { RolloutEvidence, Weakness, WeaknessKind } from './rigger-evidence.js';
import { readLlmProposals, riggerMessages, type ChatMessage, type LlmProposals, type LlmReply } from './rigger-llm.js';
import {
  proposeVariants,
  weaknessesWithoutProposal,
  type Proposal,
  type RiggedEnvironment,
} from './rigger-proposals.js';
import { weaknessTable, weaknesses } from './rigger-weaknesses.js';
import type { EnvironmentSettings } from './settings.js';
import { identifiedVariants, variantId, type IdentifiedVariant, type VariantSpec } from './variant-spec.js';

/** Why a variant is in the run: declared in its config, or proposed by the rigger after an iteration. */
export type VariantOrigin = 'declared' | 'rigger';

/** A variant the run may train in, with where it came from and why. */
export interface RunVariant extends IdentifiedVariant {
  origin: VariantOrigin;
  /** Why it exists: "declared in config", or the rigger's reason (the weakness it is aimed at). */
  why: string;
  /** The iteration after which the rigger proposed it. */
  proposedAfter?: number;
}

/**
 * What the rigger found after one iteration and what it proposed: kept per run and iteration in
 * the artifact store (a retry reads it back), plain JSON, so a run report can show it as it was.
 */
export interface RiggerReport {
  iteration: number;
  /** The iterations whose training rollouts it read. */
  window: number[];
  /** Scored rollouts among them (the rest failed on Rein's machinery and say nothing). */
  rollouts: number;
  weaknesses: Weakness[];
  /** weaknessTable(weaknesses): the run report's table. */
  table: string;
  proposals: Array<{
    id: string;
    spec: VariantSpec;
    why: string;
    aimedAt: { kind: WeaknessKind; subject: string };
    /** Who proposed it: the rule table, or the LLM (environment.rigger.llm). */
    by: 'rules' | 'llm';
  }>;
  /** Weaknesses no proposal is aimed at, with the reason (no rule fits, or every variant for it exists). */
  unaddressed: Array<{ kind: WeaknessKind; subject: string; why: string }>;
  /** When the LLM was asked: which model, the rollout its call is journaled under, and what it answered. */
  llm?: {
    model: string;
    rolloutId: string;
    proposed: number;
    refused: LlmProposals['refused'];
    /** Why there is no answer (the call failed); the rule-based proposals stand alone. */
    error?: string;
  };
}

/** How the LLM's answer fared, as an iteration's result and the run report show it (the refused items: the report). */
export interface RiggerLlmSummary {
  model: string;
  rolloutId: string;
  proposed: number;
  refused: number;
  error?: string;
}

/** The rigger's LLM for one turn: the model asked, the rollout its call is journaled under, and the call. */
export interface RiggerLlm {
  model: string;
  rolloutId: string;
  ask(messages: ChatMessage[]): Promise<LlmReply>;
}

export const DECLARED_WHY = 'declared in config';

/** The run's variants: those its config declares, then the rigger's proposals in the order they came. */
export function runVariants(
  environmentId: string,
  declared: readonly VariantSpec[],
  reports: readonly RiggerReport[],
): RunVariant[] {
  const variants: RunVariant[] = identifiedVariants(environmentId, declared).map((v) => ({
    ...v,
    origin: 'declared',
    why: DECLARED_WHY,
  }));
  for (const report of [...reports].sort((a, b) => a.iteration - b.iteration))
    for (const proposal of report.proposals)
      variants.push({
        id: variantId(environmentId, proposal.spec),
        spec: proposal.spec,
        origin: 'rigger',
        why: proposal.why,
        proposedAfter: report.iteration,
      });
  return variants;
}

/**
 * The rigger's turn after `iteration`: the weaknesses in the window's evidence, and up to
 * `settings.rigger.proposals` variants aimed at them that no variant of the run already makes:
 * the LLM's first when one is given (and there is a weakness to ask about), then the rule table's.
 */
export async function rig(
  environment: LoadedEnvironment,
  settings: EnvironmentSettings['rigger'],
  iteration: number,
  evidence: readonly RolloutEvidence[],
  existing: readonly RunVariant[],
  llm?: RiggerLlm,
): Promise<RiggerReport> {
  const found = weaknesses(evidence, settings.thresholds);
  const rigged: RiggedEnvironment = {
    tools: toolNames(environment.definition),
    ...(environment.definition.stateParams && { stateParams: environment.definition.stateParams }),
  };
  const specs = existing.map((v) => v.spec);
  const asked = llm && found.length > 0 ? await askLlm(llm, found, rigged, specs, settings.proposals) : undefined;
  const fromLlm = asked?.proposals ?? [];
  const fromRules = proposeVariants(found, rigged, [...specs, ...fromLlm.map((p) => p.variant)], {
    max: settings.proposals - fromLlm.length,
  });
  const proposals = [...fromLlm, ...fromRules];
  return {
    iteration,
    window: [...new Set(evidence.map((e) => e.iteration))].sort((a, b) => a - b),
    rollouts: evidence.filter((e) => e.success !== null).length,
    weaknesses: found,
    table: weaknessTable(found),
    proposals: proposals.map((p, i) => ({
      id: variantId(environment.id, p.variant),
      spec: p.variant,
      why: p.why,
      aimedAt: { kind: p.aimedAt.kind, subject: p.aimedAt.subject },
      by: i < fromLlm.length ? 'llm' : 'rules',
    })),
    unaddressed: weaknessesWithoutProposal(found, rigged, proposals).map(({ weakness, why }) => ({
      kind: weakness.kind,
      subject: weakness.subject,
      why,
    })),
    ...(llm && asked && { llm: { model: llm.model, rolloutId: llm.rolloutId, ...asked.record } }),
  };
}

async function askLlm(
  llm: RiggerLlm,
  found: readonly Weakness[],
  rigged: RiggedEnvironment,
  existing: readonly VariantSpec[],
  max: number,
): Promise<{ proposals: Proposal[]; record: Omit<NonNullable<RiggerReport['llm']>, 'model' | 'rolloutId'> }> {
  const reply = await llm.ask(riggerMessages(found, rigged, existing, max));
  if ('error' in reply) return { proposals: [], record: { proposed: 0, refused: [], error: reply.error } };
  const read = readLlmProposals(reply.text, found, rigged, existing, max);
  return { proposals: read.proposals, record: { proposed: read.proposals.length, refused: read.refused } };
}

/** How an iteration's training rollouts did in one environment: the original, or a variant the curriculum used. */
export interface VariantUse {
  /** The variant's label; "original" for the environment unchanged. */
  name: string;
  /** The variant's id; null for the original. */
  id: string | null;
  origin: VariantOrigin | 'original';
  why: string;
  rollouts: number;
  /** Rollouts the verifier scored (the rest failed on Rein's machinery). */
  scored: number;
  /** Scored rollouts whose reward reached the gate's acceptReward. */
  solved: number;
  /** The scored rollouts' mean reward; null when none was scored. */
  meanReward: number | null;
}

/** The iteration's training rollouts by the environment they ran in: the original first, then each variant used. */
export function variantUse(evidence: readonly RolloutEvidence[], variants: readonly RunVariant[]): VariantUse[] {
  const byId = new Map(variants.map((v) => [v.id, v]));
  const groups = new Map<string | null, RolloutEvidence[]>();
  for (const e of evidence) groups.set(e.variant, [...(groups.get(e.variant) ?? []), e]);
  const order = [null, ...variants.map((v) => v.id)].filter((id) => groups.has(id));
  // A variant the run no longer knows (its config changed under a continued run) is still shown, by id.
  for (const id of groups.keys()) if (!order.includes(id)) order.push(id);
  return order.map((id) => {
    const group = groups.get(id)!;
    const scored = group.filter((e) => e.reward !== null);
    const variant = id === null ? undefined : byId.get(id);
    return {
      name: id === null ? 'original' : (variant?.spec.name ?? id),
      id,
      origin: id === null ? 'original' : (variant?.origin ?? 'declared'),
      why: id === null ? 'the environment unchanged (held-out replay runs only this)' : (variant?.why ?? 'unknown'),
      rollouts: group.length,
      scored: scored.length,
      solved: scored.filter((e) => e.success === true).length,
      meanReward: scored.length === 0 ? null : scored.reduce((sum, e) => sum + e.reward!, 0) / scored.length,
    };
  });
}
