import type { PolicyRegistry, StoredDecision } from '../registry/policy-registry.js';
import { PRODUCTION_ALIAS } from '../registry/promotion.js';
import { formatTable } from '../text-table.js';
import type { GateDecision } from '../gate/gate.js';

const percent = (x: number) => `${(100 * x).toFixed(1)}%`;

/** A gate decision for a terminal: verdict, the paired numbers, each check with the rollouts behind it. */
export function formatDecision(
  stored: StoredDecision,
  options: { rolloutsPerCheck?: number; gatewayUrl?: string } = {},
): string {
  const record = stored.record as unknown as GateDecision & { traces?: string | null };
  const { evidence } = record;
  const shown = options.rolloutsPerCheck ?? 5;
  // Decisions recorded before unscored rollouts were set aside have no `scored`: all their pairs counted.
  const scoredPairs =
    evidence.scored && evidence.scored.pairs !== evidence.pairs
      ? `${evidence.scored.pairs} scored of ${evidence.pairs}`
      : `${evidence.pairs}`;
  const lines = [
    `Gate decision ${stored.id}: ${stored.verdict.toUpperCase()} — ${stored.candidate} against production ${stored.incumbent}`,
    evidence.acceptedRate && evidence.gain
      ? `  accepted tasks: ${percent(evidence.acceptedRate.incumbent)} → ${percent(evidence.acceptedRate.candidate)} over ${scoredPairs} pairs (${evidence.tasks} tasks); ` +
        `${evidence.gain.gained} gained, ${evidence.gain.lost} lost`
      : `  no pair of the ${evidence.pairs} replayed was scored on both sides`,
    ...record.checks.map((check) => {
      const ids = check.rollouts.slice(0, shown);
      const more = check.rollouts.length > shown ? ` (+${check.rollouts.length - shown} more)` : '';
      return `  ${check.passed ? 'ok  ' : 'FAIL'} ${check.name}: ${check.detail}${ids.length > 0 ? `\n         rollouts: ${ids.join(', ')}${more}` : ''}`;
    }),
  ];
  // The gateway as configured now: the one recorded with the decision may have moved since (another port, a restart).
  const traces = options.gatewayUrl ? `${options.gatewayUrl}/api/rollouts/{rolloutId}` : record.traces;
  if (traces) lines.push(`  traces: ${traces.replace('{rolloutId}', '<rollout>')}/calls (gateway admin key)`);
  return `${lines.join('\n')}\n`;
}

export interface DecisionListing {
  id: string;
  candidate: string;
  incumbent: string;
  verdict: string;
  /** Held-out success of production and of the candidate over the scored pairs; absent when none was scored. */
  acceptedRate: { incumbent: number; candidate: number } | undefined;
  gained: number | undefined;
  lost: number | undefined;
  /** Whether production moved to the candidate on this decision. */
  promoted: boolean;
  createdAt: string;
}

/** Every gate decision about the registry's versions (or one run's), newest first. */
export async function listDecisions(registry: PolicyRegistry, filter: { runId?: string }): Promise<DecisionListing[]> {
  const promotedBy = new Set(
    (await registry.aliasHistory(PRODUCTION_ALIAS)).flatMap((c) => (c.decisionId ? [c.decisionId] : [])),
  );
  const policies = await registry.list(filter);
  return (await Promise.all(policies.map((p) => registry.decisionsFor(p.version))))
    .flat()
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt))
    .map((d) => {
      const evidence = (d.record as unknown as Partial<GateDecision>).evidence;
      return {
        id: d.id,
        candidate: d.candidate,
        incumbent: d.incumbent,
        verdict: d.verdict,
        acceptedRate: evidence?.acceptedRate,
        gained: evidence?.gain?.gained,
        lost: evidence?.gain?.lost,
        promoted: promotedBy.has(d.id),
        createdAt: d.createdAt,
      };
    });
}

/**
 * The decisions as a table; on a narrow terminal (`width`) their ids (about 90 characters) and then the production
 * version and whether production moved are left out, and `rein decision --candidate` finds one by its candidate.
 */
export function formatDecisionList(decisions: readonly DecisionListing[], width?: number): string {
  const rows = decisions.map((d) => [
    d.id,
    d.candidate,
    d.incumbent,
    d.verdict.toUpperCase(),
    d.acceptedRate ? `${percent(d.acceptedRate.incumbent)} → ${percent(d.acceptedRate.candidate)}` : '-',
    d.gained === undefined ? '-' : `+${d.gained} −${d.lost ?? 0}`,
    d.promoted ? 'promoted' : 'not promoted',
    d.createdAt.slice(0, 16).replace('T', ' '),
  ]);
  const header = ['decision', 'candidate', 'production', 'verdict', 'held-out success', 'tasks', 'production moved'];
  const table = formatTable([...header, 'decided'], rows, {
    width,
    dropFirst: [0, 2, 6],
    more: 'see --json',
  });
  return `${table}\n\`rein decision --candidate VERSION\` (or ID) shows one with its checks.\n`;
}
