import { FAILURE_CLASSES } from '../../../rollouts/failure-classes.js';
import { ROLLOUT_STATUSES } from '../../../rollouts/rollout-states.js';
import { MISMATCH_CAUSES } from '../../../samples/mismatch-causes.js';
import { addressHref, addressParams, applyGoesTo } from '../address.js';
import { enc, get } from '../api.js';
import { h, link, num, table, when } from '../dom.js';
import { exportLinks, type ExportValue } from '../export.js';
import type { PageContext } from '../page.js';
import type { RunRolloutRow, RunRolloutsPage } from '../types.js';

/** The filters the page offers, as the API names them; the page's address carries them (a view can be shared). */
const FILTERS = [
  'iteration',
  'kind',
  'taskId',
  'status',
  'failureClass',
  'mergeCause',
  'policyVersion',
  'minReward',
  'maxReward',
];
const PAGE_SIZES = ['25', '50', '100', '250'];

/** The filters and page in the address: `#/runs/<id>/rollouts?kind=train&after=…`. */
export const rolloutsHref = (runId: string, params: Record<string, string> = {}) =>
  addressHref(`#/runs/${enc(runId)}/rollouts`, params);

/** All of a run's rollouts, training and held-out, filtered and paged, each linked to its journal. */
export async function runRolloutsPage({ root }: PageContext, runId: string): Promise<void> {
  const params = addressParams();
  const query = new URLSearchParams();
  for (const name of [...FILTERS, 'limit', 'after']) {
    const value = params.get(name);
    if (value) query.set(name, value);
  }
  const page = await get<RunRolloutsPage>(`/api/runs/${enc(runId)}/rollouts?${query.toString()}`);
  const filtered = FILTERS.some((name) => params.get(name));
  const here = Object.fromEntries([...query].filter(([name]) => name !== 'after'));
  root.replaceChildren(
    h('h1', {}, 'Rollouts of run ', link(`#/runs/${enc(runId)}`, runId, { 'data-run': runId })),
    filterForm(runId, params),
    page.items.length === 0
      ? h(
          'p',
          { class: 'muted', 'data-empty': '' },
          filtered ? 'No rollout matches these filters.' : 'This run has no rollouts yet.',
        )
      : rolloutsTable(page.items),
    h(
      'p',
      { class: 'pager' },
      `${page.items.length} rollout${page.items.length === 1 ? '' : 's'} on this page. `,
      params.get('after') ? link(rolloutsHref(runId, here), 'First page', { 'data-first': '' }) : null,
      params.get('after') && page.next ? ' · ' : null,
      page.next ? link(rolloutsHref(runId, { ...here, after: page.next }), 'Next page', { 'data-next': '' }) : null,
      ' ',
      exportLinks(`rollouts-${runId}`, () => exported(page.items)),
    ),
  );
}

/** What an export of the page holds: each row's values, as the API gave them. */
const EXPORTED: Array<keyof RunRolloutRow> = [
  'rolloutId',
  'iteration',
  'kind',
  'side',
  'taskId',
  'sample',
  'status',
  'failureClass',
  'reward',
  'policyVersion',
  'attempts',
  'updatedAt',
];

function exported(items: RunRolloutRow[]): { headings: string[]; rows: ExportValue[][] } {
  return { headings: EXPORTED, rows: items.map((r) => EXPORTED.map((k) => r[k])) };
}

function rolloutsTable(items: RunRolloutRow[]): HTMLElement {
  return table(
    ['Rollout', 'It', 'Kind', 'Task', 'Sample', 'Status', 'Failure class', 'Reward', 'Policy', 'Attempts', 'Updated'],
    items.map((r) => [
      link(`#/rollouts/${enc(r.rolloutId)}`, r.rolloutId, { 'data-rollout': r.rolloutId }),
      String(r.iteration),
      r.kind === 'train' ? 'training' : `held-out, ${r.side ?? '?'}`,
      r.taskId ?? '–',
      r.sample === null ? '–' : String(r.sample),
      r.status,
      r.failureClass ?? '–',
      h('span', { 'data-reward': r.reward === null ? '' : String(r.reward) }, num(r.reward)),
      r.policyVersion ?? '–',
      String(r.attempts),
      when(r.updatedAt),
    ]),
    { id: 'rollouts' },
    { exported: false },
  );
}

/** The filters as a form; applying it goes to the first page of what it selects. */
function filterForm(runId: string, params: URLSearchParams): HTMLElement {
  const value = (name: string) => params.get(name) ?? '';
  const choice = (name: string, label: string, options: string[]) =>
    h(
      'label',
      {},
      `${label} `,
      h(
        'select',
        { name },
        h('option', { value: '' }, 'any'),
        options.map((o) => h('option', { value: o, selected: value(name) === o }, o)),
      ),
    );
  const field = (name: string, label: string, attributes: Record<string, string> = {}) =>
    h('label', {}, `${label} `, h('input', { name, value: value(name), size: 10, ...attributes }));
  const form = h(
    'form',
    { class: 'filters', id: 'rollout-filters' },
    field('iteration', 'Iteration', { type: 'number', min: '1' }),
    choice('kind', 'Kind', ['train', 'heldout']),
    field('taskId', 'Task'),
    choice('status', 'Status', [...ROLLOUT_STATUSES]),
    choice('failureClass', 'Failure class', [...FAILURE_CLASSES]),
    choice('mergeCause', 'Merge cause', [...MISMATCH_CAUSES]),
    field('policyVersion', 'Policy'),
    field('minReward', 'Reward ≥', { type: 'number', step: 'any' }),
    field('maxReward', 'Reward ≤', { type: 'number', step: 'any' }),
    choice('limit', 'Per page', PAGE_SIZES),
    h('button', { type: 'submit' }, 'Apply'),
    ' ',
    link(rolloutsHref(runId), 'Clear'),
  );
  applyGoesTo(form, rolloutsHref(runId));
  return form;
}
