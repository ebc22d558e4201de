import { RUN_EXECUTIONS } from '../../../client/run-executions.js';
import { addressHref, addressParams, applyGoesTo } from '../address.js';
import { enc, get } from '../api.js';
import { h, link, num, table, when } from '../dom.js';
import { exportLinks } from '../export.js';
import { compareHref } from './compare.js';
import type { PageContext } from '../page.js';
import type { Aliases, RunListing, RunReport } from '../types.js';

const PAGE_SIZES = ['10', '20', '50', '100'];

/** The runs list's address, with its filters and page: `#/runs?execution=RUNNING&offset=20`. */
const runsHref = (params: Record<string, string>) => addressHref('#/runs', params);

/** Runs, newest first, filtered and paged: state, progress, the version production serves, the last held-out result. */
export async function runsPage({ root }: PageContext): Promise<void> {
  const params = addressParams();
  const filters = {
    execution: params.get('execution') ?? '',
    search: params.get('search') ?? '',
    limit: params.get('limit') ?? '20',
  };
  const offset = Math.max(0, Number(params.get('offset') ?? 0) || 0);
  const [{ items, total }, aliases] = await Promise.all([
    get<{ items: RunListing[]; total: number }>(addressHref('/api/runs', { ...filters, offset: String(offset) })),
    get<Aliases>('/api/aliases'),
  ]);
  const reports = await Promise.all(
    items.map((r) => get<RunReport>(`/api/runs/${enc(r.runId)}`).catch(() => undefined)),
  );
  const limit = Number(filters.limit);
  const rows = items.map((run, i) => runRow(run, reports[i]));
  const filtered = filters.execution !== '' || filters.search !== '';
  root.replaceChildren(
    h('h1', {}, 'Runs'),
    h(
      'p',
      {},
      'Production serves ',
      h(
        'b',
        { 'data-production': aliases.aliases.production ?? '' },
        aliases.aliases.production ?? 'the base policy (never promoted)',
      ),
      '.',
    ),
    runFilters(filters),
    items.length === 0
      ? h(
          'p',
          { class: 'muted', 'data-empty': '' },
          filtered ? 'No run matches these filters.' : 'No runs yet: start one with `rein train --config FILE`.',
        )
      : h(
          'div',
          {},
          table(
            ['', 'Run', 'State', 'Progress', 'Policy', 'Last held-out mean reward', 'Started'],
            rows,
            { id: 'runs' },
            { exported: false },
          ),
          compareButton(),
        ),
    h(
      'p',
      { class: 'pager' },
      h(
        'span',
        { 'data-total': total },
        `Runs ${items.length ? offset + 1 : 0}–${offset + items.length} of ${total}. `,
      ),
      offset > 0
        ? link(runsHref({ ...filters, offset: String(Math.max(0, offset - limit)) }), 'Newer', { 'data-newer': '' })
        : null,
      offset > 0 && offset + items.length < total ? ' · ' : null,
      offset + items.length < total
        ? link(runsHref({ ...filters, offset: String(offset + limit) }), 'Older', { 'data-older': '' })
        : null,
      ' ',
      exportLinks('runs', () => ({
        headings: ['runId', 'execution', 'stage', 'policyVersion', 'startTime', 'closeTime'],
        rows: items.map((r) => [
          r.runId,
          r.execution,
          r.stage ?? null,
          r.policyVersion ?? null,
          r.startTime,
          r.closeTime ?? null,
        ]),
      })),
    ),
  );
}

function runRow(run: RunListing, report: RunReport | undefined): Array<HTMLElement | string> {
  const status = report?.status;
  const done = status?.iterations.filter((it) => !it.failed).length ?? 0;
  const latest = status?.heldout?.latest ?? null;
  const activity = report?.activity;
  return [
    h('input', { type: 'checkbox', name: 'compare', value: run.runId, 'aria-label': `compare ${run.runId}` }),
    link(`#/runs/${enc(run.runId)}`, run.runId, { 'data-run': run.runId }),
    status?.state ?? run.execution.toLowerCase(),
    `${done} iteration${done === 1 ? '' : 's'} done${status ? `, ${status.stage}` : ''}${activity?.total ? ` (${activity.done ?? 0}/${activity.total})` : ''}`,
    status?.policyVersion ?? run.policyVersion ?? '–',
    latest ? `${num(latest.meanReward)} (${latest.policyVersion})` : '–',
    when(run.startTime),
  ];
}

/** State, text in the id, page size; applying them goes to the first page. */
function runFilters(filters: { execution: string; search: string; limit: string }): HTMLElement {
  const form = h(
    'form',
    { class: 'filters', id: 'run-filters' },
    h(
      'label',
      {},
      'State ',
      h(
        'select',
        { name: 'execution' },
        h('option', { value: '' }, 'any'),
        RUN_EXECUTIONS.map((e) => h('option', { value: e, selected: filters.execution === e }, e.toLowerCase())),
      ),
    ),
    h('label', {}, 'Run id has ', h('input', { name: 'search', value: filters.search })),
    h(
      'label',
      {},
      'Per page ',
      h(
        'select',
        { name: 'limit' },
        PAGE_SIZES.map((n) => h('option', { value: n, selected: filters.limit === n }, n)),
      ),
    ),
    h('button', { type: 'submit' }, 'Apply'),
    ' ',
    link('#/runs', 'Clear'),
  );
  applyGoesTo(form, '#/runs');
  return form;
}

/** Compares the runs whose boxes are ticked. */
function compareButton(): HTMLElement {
  const button = h('button', { type: 'button', 'data-compare': '' }, 'Compare selected runs');
  button.addEventListener('click', () => {
    const ticked = [...document.querySelectorAll<HTMLInputElement>('#runs input[name=compare]:checked')].map(
      (box) => box.value,
    );
    if (ticked.length < 2) return alert('Tick two or more runs to compare.');
    location.hash = compareHref(ticked);
  });
  return button;
}
