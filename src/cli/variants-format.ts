import type { IterationVariantsView } from '../api/variant-schemas.js';
import { wrapText } from '../text-table.js';

// How an iteration's environment variants read in a run report: the environments training ran in,
// the variants checked, and the rigger's weaknesses and proposals, each a plain table.

/** The terminal width the report keeps to. */
export const REPORT_WIDTH = 100;

/**
 * What the run report shows of an iteration's variants: the run status's (src/api/variant-schemas.ts);
 * an iteration result's IterationVariants (workflows/iteration-variants.ts) has these fields and more.
 */
export type IterationVariantsReport = IterationVariantsView;

const INDENT = '  ';
const percent = (share: number) => `${Math.round(100 * share)}%`;
const reward = (x: number | null) => (x === null ? '-' : x.toFixed(3));

/**
 * The iteration's variants block, each line indented and at most REPORT_WIDTH characters: where
 * training ran (why, rollouts, solved, mean reward), the verdicts on the variants checked, and the
 * rigger's weakness table and proposals. Empty when there is nothing to show.
 */
export function variantsBlock(variants: IterationVariantsReport | undefined): string[] {
  if (!variants) return [];
  const lines: string[] = [];
  const used = variants.used ?? [];
  if (used.length > 0)
    lines.push(
      ...wrappedTable(
        ['trained in', 'origin', 'rollouts', 'solved', 'mean reward', 'why'],
        used.map((u) => [u.name, u.origin, String(u.rollouts), `${u.solved}/${u.scored}`, reward(u.meanReward), u.why]),
      ),
    );
  if (variants.verdicts.length > 0)
    lines.push(
      ...wrappedTable(
        ['checked', 'origin', 'verdict', 'reason'],
        variants.verdicts.map((v) => [v.name, v.origin, v.kept ? 'kept' : 'rejected', v.reason]),
      ),
    );
  lines.push(...riggerLines(variants.rigger));
  return lines;
}

/** The rigger's weakness table (kind | subject | evidence | share) and what it proposed against them. */
function riggerLines(rigger: IterationVariantsReport['rigger']): string[] {
  if (!rigger) return [];
  const lines =
    rigger.weaknesses.length === 0
      ? [`${INDENT}rigger: no recurring weakness with enough support`]
      : wrappedTable(
          ['weakness', 'subject', 'evidence', 'share'],
          rigger.weaknesses.map((w) => [w.kind, w.subject, w.detail, percent(w.share)]),
          2,
        );
  if (rigger.llm)
    lines.push(
      ...wrapText(`rigger LLM: ${llmLine(rigger.llm)}`, REPORT_WIDTH - 2 * INDENT.length).map(
        (l, i) => `${INDENT}${i > 0 ? INDENT : ''}${l}`,
      ),
    );
  if (rigger.proposals.length > 0)
    lines.push(
      ...wrappedTable(
        ['proposed', 'aimed at', 'why'],
        rigger.proposals.map((p) => [p.name, `${p.aimedAt.kind} ${p.aimedAt.subject}`, p.why]),
      ),
    );
  return lines;
}

function llmLine(llm: NonNullable<NonNullable<IterationVariantsReport['rigger']>['llm']>): string {
  const outcome =
    llm.error !== undefined
      ? `no answer (${llm.error})`
      : `${llm.proposed} proposed, ${llm.refused} refused (the reasons are in the rigger's report)`;
  return `${llm.model}, its call journaled under rollout ${llm.rolloutId}: ${outcome}`;
}

/**
 * Columns padded to their widest cell, two spaces apart (as formatTable), indented, with the
 * `wrap` column (default: the last) wrapped at word boundaries so that no line is wider than
 * REPORT_WIDTH; its continuation lines leave the other columns blank.
 */
export function wrappedTable(
  header: readonly string[],
  rows: ReadonlyArray<readonly string[]>,
  wrap = header.length - 1,
): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const fixed = widths.reduce((sum, w, i) => (i === wrap ? sum : sum + w), 0);
  const room = Math.max(20, REPORT_WIDTH - INDENT.length - fixed - 2 * (header.length - 1));
  widths[wrap] = Math.min(widths[wrap] ?? 0, room);
  const line = (cells: readonly string[]) =>
    clip(
      `${INDENT}${cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ')}`.trimEnd(),
    );
  return [header, ...rows].flatMap((cells) => {
    const parts = wrapText(cells[wrap] ?? '', room);
    return parts.map((part, n) => line(cells.map((c, i) => (i === wrap ? part : n === 0 ? c : ''))));
  });
}

/** A line cut to REPORT_WIDTH, its end marked (only a cell wider than the table's room gets here). */
const clip = (line: string) => (line.length > REPORT_WIDTH ? `${line.slice(0, REPORT_WIDTH - 1)}…` : line);
