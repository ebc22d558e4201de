import { addressHref, addressParams } from '../address.js';
import { enc, get } from '../api.js';
import { facts, h, link, num, table } from '../dom.js';
import { exportLinks } from '../export.js';
import { rolloutsHref } from './run-rollouts.js';
import type { PageContext } from '../page.js';
import type { RolloutTokens, TokenRow } from '../types.js';

/** A trained token whose behaviour and trainer log-probs differ by more than this is marked (nats). */
const GAP_MARKED = 0.5;

/** `#/runs/<id>/iterations/<n>/tokens?rollout=<id>`: one rollout's training sequences, token by token. */
export const tokensHref = (runId: string, iteration: number, rolloutId: string) =>
  addressHref(`#/runs/${enc(runId)}/iterations/${iteration}/tokens`, { rollout: rolloutId });

/**
 * The per-token view of a training rollout: each sequence as its tokens (trained ones highlighted, the values at the
 * cursor), then the trained tokens as a table (weight, advantage, behaviour and trainer log-probs and their gap).
 */
export async function tokensPage({ root }: PageContext, runId: string, iteration: string): Promise<void> {
  const rolloutId = addressParams().get('rollout') ?? '';
  const view = await get<RolloutTokens>(
    `/api/runs/${enc(runId)}/iterations/${enc(iteration)}/tokens?rollout=${enc(rolloutId)}`,
  );
  root.replaceChildren(
    h('h1', {}, `Tokens of rollout ${view.rolloutId}`),
    facts([
      ['Run', link(`#/runs/${enc(runId)}`, `${runId}, iteration ${view.iteration}`, { 'data-run': runId })],
      ['Rollout', link(`#/rollouts/${enc(view.rolloutId)}`, view.rolloutId, { 'data-rollout': view.rolloutId })],
      [
        'Other rollouts',
        link(rolloutsHref(runId, { iteration: String(view.iteration), kind: 'train' }), 'this iteration’s'),
      ],
      ['Batch', view.batchUri],
      ['Trained into', view.trainedVersion ?? '–'],
      ['Trainer log-probs', view.trainerLogprobsMissing ?? 'shown (the parent’s, before the update)'],
    ]),
    h(
      'p',
      { class: 'muted' },
      `Highlighted: trained tokens (completions the policy sampled); marked red: |behaviour − trainer| > ${GAP_MARKED} nats. `,
      'Hover a token for its values.',
    ),
    ...view.sequences.flatMap((s) => [
      h(
        'h2',
        {},
        `Sequence ${s.index} of the batch: ${s.trainedTokens} of ${s.tokensTotal} tokens trained`,
        s.tokens.length < s.tokensTotal ? ` (first ${s.tokens.length} shown)` : '',
      ),
      h('div', { class: 'tokens', 'data-sequence': String(s.index) }, s.tokens.map(tokenSpan)),
      trainedTable(s.index, s.tokens),
    ]),
  );
}

const gap = (t: TokenRow) =>
  t.behaviourLogprob === null || t.trainerLogprob === null ? null : t.behaviourLogprob - t.trainerLogprob;

function tokenSpan(t: TokenRow, position: number): HTMLElement {
  const difference = gap(t);
  const title = [
    `#${position} id ${t.id}`,
    t.trained ? 'trained' : 'not trained',
    ...(t.trained
      ? [
          `weight ${num(t.weight, 4)}`,
          `advantage ${num(t.advantage, 4)}`,
          `behaviour ${num(t.behaviourLogprob, 4)}`,
          `trainer ${num(t.trainerLogprob, 4)}`,
          `sampled by ${t.policyVersion ?? '–'}`,
        ]
      : []),
  ].join(' · ');
  const classes = [t.trained ? 'trained' : '', difference !== null && Math.abs(difference) > GAP_MARKED ? 'gap' : ''];
  return h(
    'span',
    { class: `token ${classes.join(' ')}`.trim(), title, 'data-token': String(position) },
    t.text ?? `⟨${t.id}⟩`,
  );
}

/** The trained tokens, one row each; exported with the values behind it (full precision). */
function trainedTable(index: number, tokens: TokenRow[]): HTMLElement {
  const rows = tokens.flatMap((t, position) => (t.trained ? [{ position, ...t, gap: gap(t) }] : []));
  const id = `trained-tokens-${index}`;
  return h(
    'div',
    { class: 'table-block' },
    table(
      ['Position', 'Token', 'Id', 'Weight', 'Advantage', 'Behaviour log-prob', 'Trainer log-prob', 'Δ', 'Sampled by'],
      rows.map((t) => [
        String(t.position),
        JSON.stringify(t.text ?? ''),
        String(t.id),
        num(t.weight, 4),
        num(t.advantage, 4),
        num(t.behaviourLogprob, 4),
        num(t.trainerLogprob, 4),
        num(t.gap, 4),
        t.policyVersion ?? '–',
      ]),
      { id },
      { exported: false },
    ),
    exportLinks(id, () => ({
      headings: EXPORTED,
      rows: rows.map((t) => EXPORTED.map((k) => t[k])),
    })),
  );
}

const EXPORTED = [
  'position',
  'text',
  'id',
  'weight',
  'advantage',
  'behaviourLogprob',
  'trainerLogprob',
  'gap',
  'policyVersion',
] as const;
