import type { StoredDecision } from '../registry/policy-registry.js';
import type { GateDecision } from '../gate/gate.js';

const percent = (x: number) => `${(100 * x).toFixed(1)}%`;

/** A gate decision for a terminal: verdict, the paired numbers, each check with the rollouts behind it. */
export function formatDecision(stored: StoredDecision, options: { rolloutsPerCheck?: number } = {}): string {
  const record = stored.record as unknown as GateDecision & { traces?: string | null };
  const { evidence } = record;
  const shown = options.rolloutsPerCheck ?? 5;
  // Decisions recorded before unscored rollouts were set aside have no `scored`: all their pairs counted.
  const scoredPairs = evidence.scored && evidence.scored.pairs !== evidence.pairs ? `${evidence.scored.pairs} scored of ${evidence.pairs}` : `${evidence.pairs}`;
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
  if (record.traces) lines.push(`  traces: ${record.traces.replace('{rolloutId}', '<rollout>')}/calls (gateway admin key)`);
  return `${lines.join('\n')}\n`;
}
