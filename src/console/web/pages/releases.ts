import { rollbackButton } from '../actions.js';
import { get } from '../api.js';
import { h, link, pct, table, when } from '../dom.js';
import type { PageContext } from '../page.js';
import type { AliasChange, Aliases, Items, LedgerEntry } from '../types.js';

/**
 * Production's history (promotions, rollbacks, overrides) and the model, harness and environment ledgers with what
 * changed.
 */
export async function releasesPage({ root }: PageContext): Promise<void> {
  const [aliases, { items: ledger }] = await Promise.all([
    get<Aliases>('/api/aliases'),
    get<Items<LedgerEntry>>('/api/ledger'),
  ]);
  root.replaceChildren(
    h('h1', {}, 'Releases and ledgers'),
    h(
      'p',
      {},
      'Production serves ',
      h(
        'b',
        { 'data-production': aliases.aliases.production ?? '' },
        aliases.aliases.production ?? 'the base policy (never promoted)',
      ),
      '. ',
      aliases.aliases.production ? rollbackButton(aliases.aliases.production) : null,
    ),
    h('h2', {}, 'Production history'),
    productionHistory([...aliases.history].reverse()),
    h('h2', {}, 'Ledgers'),
    ledgerTable(ledgerRows(ledger)),
  );
}

/** Every move of an alias, newest first: who moved it from what to what, why, and the decision behind it. */
function productionHistory(history: AliasChange[]): HTMLElement {
  return history.length === 0
    ? h('p', { class: 'muted' }, 'Production never moved.')
    : table(
        ['When', 'Alias', 'Operation', 'From', 'To', 'By', 'Override', 'Reason', 'Decision'],
        history.map((c) => [
          when(c.at),
          c.alias,
          c.operation,
          c.from ?? '–',
          c.to,
          c.actor,
          c.override ? h('span', { class: 'fail' }, 'override') : '–',
          c.reason ?? '–',
          c.decisionId ? link(`#/decisions/${encodeURIComponent(c.decisionId)}`, 'decision') : '–',
        ]),
        { id: 'history' },
      );
}

/** The ledger's rows newest first, each with what changed since the row before it of its kind. */
function ledgerRows(ledger: LedgerEntry[]): Array<{ entry: LedgerEntry; changes: string[] }> {
  // Oldest first to compare each row with the one before it of its kind (a release replays held-out
  // tasks, an iteration trains on others: across kinds everything would differ); shown newest first.
  const chronological = [...ledger].sort((a, b) => a.at.localeCompare(b.at));
  return chronological
    .map((entry, i) => ({
      entry,
      changes: changesFrom(
        chronological.slice(0, i).findLast((e) => e.kind === entry.kind),
        entry,
      ),
    }))
    .reverse();
}

/** The ledger rows: model, harness and environment, what changed, the rollouts' numbers and the decision. */
function ledgerTable(rows: Array<{ entry: LedgerEntry; changes: string[] }>): HTMLElement {
  return table(
    [
      'When',
      'Row',
      'Model',
      'Harness',
      'Environment',
      'What changed',
      'Rollouts',
      'Accepted',
      'Tokens',
      'Tool errors',
      'Decision',
    ],
    rows.map(({ entry: e, changes }) => [
      when(e.at),
      e.variant
        ? h(
            'span',
            { 'data-variant': e.variant.id },
            `variant ${e.id}: ${e.variant.name} (${e.variant.origin}) `,
            h('span', { class: e.variant.kept ? 'pass' : 'fail' }, e.variant.kept ? 'kept' : 'rejected'),
            ` — ${e.variant.reason}`,
          )
        : `${e.kind} ${e.id}`,
      `${e.model.policyVersion} ← ${e.model.parent ?? '–'}`,
      e.harness.version,
      `tasks ${e.environment.taskSet.slice(0, 8)}, verifier ${e.environment.verifier.slice(0, 40)}, config ${e.environment.config.slice(0, 8)}`,
      changes.length === 0
        ? '–'
        : h(
            'ul',
            {},
            changes.map((c) => h('li', {}, c)),
          ),
      String(e.metrics.rollouts),
      pct(e.metrics.acceptedRate),
      String(e.metrics.tokens),
      String(e.metrics.toolErrors),
      e.decisionId ? link(`#/decisions/${encodeURIComponent(e.decisionId)}`, 'decision') : '–',
    ]),
    { id: 'ledger' },
  );
}

/** What differs from the previous row, ledger by ledger. */
function changesFrom(previous: LedgerEntry | undefined, entry: LedgerEntry): string[] {
  if (!previous) return [];
  const fields: Array<[string, string, string]> = [
    ['model', previous.model.policyVersion, entry.model.policyVersion],
    ['harness', previous.harness.version, entry.harness.version],
    ['environment: task set', previous.environment.taskSet, entry.environment.taskSet],
    ['environment: verifier', previous.environment.verifier, entry.environment.verifier],
    ['environment: config', previous.environment.config, entry.environment.config],
  ];
  return fields.filter(([, a, b]) => a !== b).map(([name, a, b]) => `${name}: ${shown(a)} → ${shown(b)}`);
}

/** A name whole; a bare content hash by its first 12 digits, as everywhere else. */
const shown = (value: string) => (/^[0-9a-f]{13,}$/.test(value) ? value.slice(0, 12) : value);
