import { enc, get } from '../api.js';
import { h, link, num, table, when } from '../dom.js';
import type { PageContext } from '../page.js';
import type { Aliases, Items, RunListing, RunReport } from '../types.js';

/** Runs, newest first: state, progress, the version production serves, the last held-out result. */
export async function runsPage({ root }: PageContext): Promise<void> {
  const [{ items }, aliases] = await Promise.all([
    get<Items<RunListing>>('/api/runs?limit=50'),
    get<Aliases>('/api/aliases'),
  ]);
  const reports = await Promise.all(
    items.map((r) => get<RunReport>(`/api/runs/${enc(r.runId)}`).catch(() => undefined)),
  );
  const rows = items.map((run, i) => {
    const report = reports[i];
    const status = report?.status;
    const done = status?.iterations.filter((it) => !it.failed).length ?? 0;
    const latest = status?.heldout?.latest ?? null;
    const activity = report?.activity;
    return [
      link(`#/runs/${enc(run.runId)}`, run.runId, { 'data-run': run.runId }),
      status?.state ?? run.execution.toLowerCase(),
      `${done} iteration${done === 1 ? '' : 's'} done${status ? `, ${status.stage}` : ''}${activity?.total ? ` (${activity.done ?? 0}/${activity.total})` : ''}`,
      status?.policyVersion ?? run.policyVersion ?? '–',
      latest ? `${num(latest.meanReward)} (${latest.policyVersion})` : '–',
      when(run.startTime),
    ];
  });
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
    items.length === 0
      ? h('p', { class: 'muted' }, 'No runs yet: start one with `rein train --config FILE`.')
      : table(['Run', 'State', 'Progress', 'Policy', 'Last held-out mean reward', 'Started'], rows, { id: 'runs' }),
  );
}
