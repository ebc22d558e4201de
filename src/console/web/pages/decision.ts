import { enc, get } from '../api.js';
import { facts, h, json, link, num, pct, table, verdict, when } from '../dom.js';
import type { PageContext } from '../page.js';
import type { Decision, DecisionPair, Items, PairSide } from '../types.js';

/**
 * A gate decision: each check with its numbers, and the held-out tasks gained and lost, each a link to its rollouts.
 */
export async function decisionPage({ root }: PageContext, decisionId: string): Promise<void> {
  const [decision, { items: pairs }] = await Promise.all([
    get<Decision>(`/api/decisions/${enc(decisionId)}`),
    get<Items<DecisionPair>>(`/api/decisions/${enc(decisionId)}/pairs`),
  ]);
  const { record } = decision;
  const changed = pairs.filter((p) => p.outcome === 'gained' || p.outcome === 'lost');
  root.replaceChildren(
    h('h1', {}, 'Gate decision ', verdict(decision.verdict)),
    decisionFacts(decision),
    ...(record.reasons && record.reasons.length > 0
      ? [
          h('h2', {}, 'Reasons'),
          h(
            'ul',
            {},
            record.reasons.map((r) => h('li', {}, r)),
          ),
        ]
      : []),
    h('h2', {}, 'Checks'),
    checks(decision),
    ...environment(decision),
    h('h2', {}, `Tasks gained and lost (${changed.length} of ${pairs.length} pairs)`),
    pairTable(decision, pairs),
    h('h2', {}, 'Rules'),
    table(['Rule', 'Value'], settingRows(record.rules ?? {}), { id: 'rules' }),
    // The whole record is there for whoever needs it, folded: the facts, checks and pairs above say what it holds.
    h('details', { id: 'raw-evidence' }, h('summary', {}, 'Evidence as recorded (JSON)'), json(record.evidence ?? {})),
  );
}

/** A nested settings object as rows of dotted path and value (lists of plain values on one line). */
function settingRows(value: unknown, prefix = ''): string[][] {
  if (value === null || typeof value !== 'object') return [[prefix || '(value)', String(value)]];
  if (Array.isArray(value))
    return value.every((v) => v === null || typeof v !== 'object')
      ? [[prefix, value.join(', ') || '–']]
      : value.flatMap((v, i) => settingRows(v, `${prefix}[${i}]`));
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return [[prefix || '(none)', '–']];
  return entries.flatMap(([k, v]) => settingRows(v, prefix ? `${prefix}.${k}` : k));
}

/** The candidate against production: held-out success of each, the gain with its interval and test, when and its id. */
function decisionFacts(decision: Decision): HTMLElement {
  const evidence = decision.record.evidence ?? {};
  const gain = evidence.gain as
    | {
        estimate?: number;
        lower?: number;
        upper?: number;
        pValue?: number;
        gained?: number;
        lost?: number;
        test?: string;
      }
    | undefined;
  const accepted = evidence.acceptedRate as { incumbent: number; candidate: number } | undefined;
  return facts([
    ['Candidate', decision.candidate],
    ['Production (incumbent)', decision.incumbent],
    [
      'Held-out success',
      accepted ? `${pct(accepted.candidate)} candidate vs ${pct(accepted.incumbent)} production` : '–',
    ],
    [
      'Gain',
      gain
        ? `${pct(gain.estimate)}${gain.lower !== undefined ? ` [${pct(gain.lower)}, ${pct(gain.upper)}]` : ''}${gain.pValue !== undefined ? `, p = ${num(gain.pValue)}` : ''} (${gain.test ?? ''}; ${gain.gained ?? 0} gained, ${gain.lost ?? 0} lost)`
        : '–',
    ],
    ['Decided', when(decision.createdAt)],
    ['Id', decision.id],
  ]);
}

/** Each of the gate's checks: passed or not, its numbers, and links to the rollouts behind them. */
function checks({ record }: Decision): HTMLElement {
  return table(
    ['Check', 'Passed', 'Numbers', 'Rollouts'],
    (record.checks ?? []).map((c) => [
      c.name,
      h('span', { class: c.passed ? 'pass' : 'fail' }, c.passed ? 'yes' : 'no'),
      c.detail,
      c.rollouts.map((id) => h('div', {}, link(`#/rollouts/${enc(id)}`, id, { 'data-rollout': id }))),
    ]),
    { id: 'checks' },
  );
}

/**
 * The run's environment the decision rests on: its module, and every variant checked so far, kept or rejected, whether
 * training used it, and its row in the environment ledger. Nothing for a run without an environment.
 */
function environment({ record }: Decision): HTMLElement[] {
  const env = record.environment;
  if (!env) return [];
  const trainedIn = new Set(env.trainedIn);
  return [
    h('h2', {}, 'Environment'),
    facts([
      ['Module', h('code', { 'data-module': env.module }, env.module)],
      [
        'Trained in',
        env.trainedIn.length === 0
          ? 'the original environment only'
          : `the original and ${env.trainedIn.length} variant${env.trainedIn.length === 1 ? '' : 's'}`,
      ],
    ]),
    env.variants.length === 0
      ? h('p', { class: 'muted' }, 'No variant was checked before this decision.')
      : table(
          ['Variant', 'Origin', 'Check', 'Training used it', 'Ledger row', 'Id'],
          env.variants.map((v) => [
            v.name,
            v.origin,
            h('span', { class: v.kept ? 'pass' : 'fail', 'data-kept': String(v.kept) }, v.kept ? 'kept' : 'rejected'),
            trainedIn.has(v.id) ? 'yes' : 'no',
            link('#/releases', v.ledgerId, { 'data-ledger': v.ledgerId }),
            h('code', {}, v.id),
          ]),
          { id: 'environment-variants' },
        ),
  ];
}

/** The held-out pairs task by task: whether the candidate gained or lost the task, and each side's rollout. */
function pairTable(decision: Decision, pairs: DecisionPair[]): HTMLElement {
  return table(
    ['Task', 'Sample', 'Outcome', `Production ${decision.incumbent}`, `Candidate ${decision.candidate}`],
    pairs.map((p) => [
      p.taskId,
      String(p.sample),
      h(
        'span',
        {
          class: p.outcome === 'gained' ? 'pass' : p.outcome === 'lost' ? 'fail' : 'muted',
          'data-outcome': p.outcome,
        },
        p.outcome,
      ),
      sideRollout(p.incumbent),
      sideRollout(p.candidate),
    ]),
    { id: 'pairs' },
  );
}

/** One side of a pair: a link to its rollout, reading its reward (or unscored) and failure class. */
function sideRollout(side: PairSide): HTMLElement {
  return link(
    `#/rollouts/${enc(side.rolloutId)}`,
    `${side.reward === null ? 'unscored' : num(side.reward)}${side.failureClass ? ` (${side.failureClass})` : ''}`,
    { 'data-rollout': side.rolloutId },
  );
}
