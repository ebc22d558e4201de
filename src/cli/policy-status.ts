import type { GateDecision } from '../gate/gate.js';
import type { PolicyRecord, PolicyRegistry, StoredDecision } from '../registry/policy-registry.js';
import { PRODUCTION_ALIAS } from '../registry/promotion.js';
import { formatTable } from '../text-table.js';

export interface PolicyView extends PolicyRecord {
  aliases: string[];
  /**
   * What became of the version, from the aliases and its newest gate decision (the registry's own
   * status moves only on promotion and rollback): promoted, retired, refused (gate fail),
   * undecided (gate insufficient), passed (not promoted), not gated.
   */
  state: string;
  /** The newest gate decision about it, if any. */
  decision: { id: string; verdict: string; incumbent: string } | undefined;
  /** Held-out success at that gate: the candidate's, and production's on the same tasks. */
  heldout: string | undefined;
  /** The trainer's numeric metrics of the update that made it (loss, KL, clip fraction, ...). */
  trainer: string | undefined;
}

const percent = (x: number) => `${(100 * x).toFixed(1)}%`;
const number = (x: number) => (Number.isInteger(x) ? String(x) : x.toPrecision(3));

export async function describePolicies(registry: PolicyRegistry, filter: { runId?: string }): Promise<PolicyView[]> {
  const aliases = Object.entries(await registry.aliases());
  const production = await registry.alias(PRODUCTION_ALIAS);
  const policies = await registry.list(filter);
  const newestDecisions = await Promise.all(policies.map(async (p) => (await registry.decisionsFor(p.version))[0]));
  return policies.map((p, i) => {
    const newest: StoredDecision | undefined = newestDecisions[i];
    const rate = (newest?.record as Partial<GateDecision> | undefined)?.evidence?.acceptedRate;
    return {
      ...p,
      aliases: aliases.filter(([, v]) => v === p.version).map(([a]) => a),
      state: stateOf(p, production, newest),
      decision: newest && { id: newest.id, verdict: newest.verdict, incumbent: newest.incumbent },
      heldout: rate
        ? `${percent(rate.candidate)} (production ${newest?.incumbent} ${percent(rate.incumbent)})`
        : undefined,
      trainer: trainerSummary(p.trainerMetrics),
    };
  });
}

function stateOf(p: PolicyRecord, production: string | undefined, newest: StoredDecision | undefined): string {
  if (p.version === production) return 'promoted';
  if (p.status === 'retired') return 'retired';
  if (p.status === 'promoted') return 'promoted, no longer production';
  if (!newest) return p.runId === null ? 'registered' : 'not gated';
  if (newest.verdict === 'fail') return 'refused (gate fail)';
  if (newest.verdict === 'insufficient') return 'undecided (gate insufficient)';
  return 'passed, not promoted';
}

// What people who train models look at first; the rest follow in the trainer's order.
const FIRST = ['loss', 'approxKl', 'clipFraction', 'entropy', 'gradNorm', 'steps'];

function trainerSummary(metrics: Record<string, unknown>): string | undefined {
  const rank = (key: string) => (FIRST.includes(key) ? FIRST.indexOf(key) : FIRST.length);
  const numbers = Object.entries(metrics)
    .filter((e): e is [string, number] => typeof e[1] === 'number' && Number.isFinite(e[1]))
    .sort(([a], [b]) => rank(a) - rank(b));
  return numbers.length === 0 ? undefined : numbers.map(([k, v]) => `${k} ${number(v)}`).join(', ');
}

/**
 * The registry as a table: what fits a terminal by default (version, aliases, status, held-out success, when), every
 * column with `--wide` (a line of ~300 characters).
 */
export function policiesTable(policies: readonly PolicyView[], wide: boolean, width?: number): string {
  const registered = (p: PolicyView) => p.createdAt.slice(0, wide ? 19 : 16).replace('T', ' ');
  if (!wide) {
    const rows = policies.map((p) => [
      p.version,
      p.aliases.join(', ') || '-',
      p.state,
      p.heldout ?? '-',
      registered(p),
    ]);
    return formatTable(['version', 'aliases', 'status', 'held-out success', 'registered'], rows, {
      width,
      dropFirst: [4, 1],
      more: 'see --wide',
    });
  }
  const rows = policies.map((p) => [
    p.version,
    p.aliases.join(', ') || '-',
    p.parent ?? '-',
    p.state,
    p.format === 'lora' ? `lora on ${p.baseCheckpointUri ?? '?'}` : 'full',
    p.runId ?? '-',
    p.iteration === null ? '-' : String(p.iteration),
    p.batchContentHash?.slice(0, 12) ?? '-',
    p.heldout ?? '-',
    p.trainer ?? '-',
    registered(p),
  ]);
  const header = ['version', 'aliases', 'parent', 'status', 'weights', 'run', 'iteration', 'batch'];
  return formatTable([...header, 'held-out success', 'trainer', 'registered'], rows);
}
