/** bench:envharness's short table: one row per run and one per arm over all seeds. */
import type { Gain, StepsAndGiveUps } from './envharness-measures.js';

interface TableRun {
  arm: string;
  seed: number;
  wallSeconds: number;
  heldoutSuccess: { base: number; final: number };
  gain: Gain;
  final: StepsAndGiveUps;
  kept: string[];
  trainingRollouts: number;
  validationRollouts: number;
  trainingInVariants: number;
}

interface TablePooled {
  gain: Gain;
  final: StepsAndGiveUps;
  trainingRollouts: number;
  validationRollouts: number;
  trainingShareInVariants: number;
}

export interface TableSummary {
  wallMinutes: number;
  runs: TableRun[];
  pooled: Record<string, TablePooled>;
  variantsMinusPlain: { bySeed: Record<string, Gain | null>; pooled: Gain | null };
}

const signed = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}`;
export const gainText = (g: Gain) => `${signed(g.points)} [${signed(g.interval95[0])}, ${signed(g.interval95[1])}]`;
const giveUpText = (s: StepsAndGiveUps) =>
  `${s.giveUps}/${s.failures}${s.giveUpShare === null ? '' : ` (${Math.round(100 * s.giveUpShare)}%)`}`;

export function printTable(summary: TableSummary): void {
  const header = ['arm', 'seed', 'held-out base→final', 'gain, points [95%]', 'steps/solved', 'give-ups/failures'];
  const rows: string[][] = summary.runs.map((r) => [
    r.arm,
    String(r.seed),
    `${r.heldoutSuccess.base}% → ${r.heldoutSuccess.final}%`,
    gainText(r.gain),
    String(r.final.stepsPerSolved ?? '-'),
    giveUpText(r.final),
  ]);
  for (const [arm, p] of Object.entries(summary.pooled))
    rows.push([arm, 'all', '', gainText(p.gain), String(p.final.stepsPerSolved ?? '-'), giveUpText(p.final)]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ');
  console.log(`\n${line(header)}`);
  for (const row of rows) console.log(line(row));
  const { bySeed, pooled } = summary.variantsMinusPlain;
  if (pooled) {
    console.log('\nvariants − plain (gain difference, points [95%]):');
    for (const [seed, g] of Object.entries(bySeed)) if (g) console.log(`  seed ${seed}: ${gainText(g)}`);
    console.log(`  pooled (tasks resampled): ${gainText(pooled)}`);
  }
  for (const r of summary.runs.filter((x) => x.arm === 'variants'))
    console.log(
      `seed ${r.seed}: kept ${r.kept.join(', ') || 'none'}; ${r.trainingInVariants}/${r.trainingRollouts} training rollouts in variants, ${r.validationRollouts} checking them`,
    );
  console.log(
    `wall: ${summary.wallMinutes} min (${summary.runs.map((r) => `${r.arm}/${r.seed} ${r.wallSeconds}s`).join(', ')})`,
  );
}
