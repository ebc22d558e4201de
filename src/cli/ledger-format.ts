import { createHash } from 'node:crypto';
import { formatTable, wrapLine } from '../text-table.js';
import { ledgerChanges, type LedgerEntry, type LedgerName } from '../ledger/ledger.js';

const short = (text: string, n = 12) => (text.length > n ? text.slice(0, n) : text);
const environmentId = (e: LedgerEntry['environment']) =>
  createHash('sha256').update(`${e.taskSet}|${e.verifier}|${e.config}`).digest('hex').slice(0, 8);

/**
 * The three ledgers as one table (a row per iteration, release and variant check, refused releases
 * included), with what each environment id stands for and each variant check's verdict.
 * `verdicts`: the gate's verdict by decision id.
 */
export function formatLedger(
  entries: readonly LedgerEntry[],
  verdicts: ReadonlyMap<string, string> = new Map(),
  width?: number,
): string {
  const rows = entries.map((e) => [
    e.id,
    e.kind,
    e.model.policyVersion,
    short(e.harness.version),
    environmentId(e.environment),
    `${(100 * e.metrics.acceptedRate).toFixed(1)}%`,
    String(e.metrics.rollouts),
    String(e.metrics.tokens),
    `${e.metrics.elapsedSeconds.toFixed(0)} s`,
    String(e.metrics.toolErrors),
    String(e.metrics.retries),
    String(e.metrics.interventions),
    String(e.metrics.irreversibleFailures),
    e.decisionId ? (verdicts.get(e.decisionId) ?? '?') : '-',
  ]);
  const table = formatTable(
    [
      'entry',
      'kind',
      'model',
      'harness',
      'environment',
      'accepted',
      'rollouts',
      'tokens',
      'elapsed',
      'tool errors',
      'retries',
      'interventions',
      'irreversible',
      'gate',
    ],
    rows,
    // On a narrow terminal: the counts people read least, then what the legend below and --json say.
    { width, dropFirst: [11, 12, 10, 9, 8, 7, 3, 1], more: 'see --json' },
  );
  const legend = environmentLegend(entries);
  const releases = entries.filter((e) => e.kind === 'release');
  const lastTwo =
    releases.length >= 2
      ? `\nBetween the last two releases:\n${formatLedgerChanges(releases.at(-2) as LedgerEntry, releases.at(-1) as LedgerEntry)}`
      : '';
  const prose = `${legend.join('\n')}\n${variantChecks(entries)}${lastTwo}`;
  return `${table}\n${prose
    .split('\n')
    .flatMap((line) => wrapLine(line, width))
    .join('\n')}`;
}

/**
 * What each environment id stands for, with the variants training rows ran in (a variant row's own
 * variant is only checked there, so it shows under "Variant checks").
 */
function environmentLegend(entries: readonly LedgerEntry[]): string[] {
  const environments = new Map<string, { env: LedgerEntry['environment']; variants: Set<string> }>();
  for (const e of entries) {
    const id = environmentId(e.environment);
    const known = environments.get(id) ?? { env: e.environment, variants: new Set<string>() };
    if (e.kind !== 'variant') for (const v of e.environment.variants ?? []) known.variants.add(v);
    environments.set(id, known);
  }
  return [...environments].map(
    ([id, { env, variants }]) =>
      `  environment ${id}: task set ${env.taskSet}, verifier ${env.verifier}, config ${env.config}` +
      (env.module ? `, module ${env.module}` : '') +
      (variants.size > 0 ? `, variants ${[...variants].join(' ')}` : ''),
  );
}

/** Each variant row's variant and verdict: "r.variant.ab12: paged-1000 (rigger) kept: solved by 2 of 4 …". */
function variantChecks(entries: readonly LedgerEntry[]): string {
  const checks = entries.flatMap((e) =>
    e.variant
      ? [
          `  ${e.id}: ${e.variant.name} (${e.variant.origin}) ${e.variant.kept ? 'kept' : 'rejected'}: ${e.variant.reason}`,
        ]
      : [],
  );
  return checks.length === 0 ? '' : `Variant checks:\n${checks.join('\n')}\n`;
}

/** Which of the three ledgers changed between two entries, and how the measurements moved. */
export function formatLedgerChanges(a: LedgerEntry, b: LedgerEntry): string {
  const changes = ledgerChanges(a, b);
  const lines = (['model', 'harness', 'environment'] as LedgerName[]).map((name) => {
    const fields = changes[name];
    return fields.length === 0
      ? `  ${name}: unchanged`
      : `  ${name}: CHANGED (${fields.map((f) => `${f.field} ${String(f.from)} → ${String(f.to)}`).join('; ')})`;
  });
  const delta = (label: string, x: number, y: number, unit = '') => `${label} ${x}${unit} → ${y}${unit}`;
  lines.push(
    `  ${a.id} → ${b.id}: ` +
      [
        delta(
          'accepted',
          Number((100 * a.metrics.acceptedRate).toFixed(1)),
          Number((100 * b.metrics.acceptedRate).toFixed(1)),
          '%',
        ),
        delta('tokens', a.metrics.tokens, b.metrics.tokens),
        delta('tool errors', a.metrics.toolErrors, b.metrics.toolErrors),
        delta('irreversible', a.metrics.irreversibleFailures, b.metrics.irreversibleFailures),
      ].join(', '),
  );
  return `${lines.join('\n')}\n`;
}
