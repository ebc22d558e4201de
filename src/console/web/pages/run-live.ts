import { ApiError, enc, get } from '../api.js';
import { h, link } from '../dom.js';
import type { RunReport, RunRolloutsPage, UpdateLog } from '../types.js';

/** Rollouts listed as running at most (the rollout browser lists them all). */
const RUNNING_SHOWN = 20;

/**
 * What a run is doing now, drawn into its own section and refreshed in place (the rest of the page, its charts
 * above all, stays as it is): the stage and activity, the rollouts running (each page shows its harness's log as it
 * grows), and the trainer's log of the current or last policy update.
 */
export async function refreshLive(section: HTMLElement, report: RunReport): Promise<void> {
  const running = report.execution === 'RUNNING';
  const iteration = report.status?.nextIteration ?? 1;
  const [log, rollouts] = await Promise.all([
    latestUpdateLog(report.runId, running ? iteration : iteration - 1),
    running
      ? get<RunRolloutsPage>(`/api/runs/${enc(report.runId)}/rollouts?status=running&limit=${RUNNING_SHOWN}`)
      : null,
  ]);
  const stage = report.status?.stage ?? report.activity?.stage;
  const activity = report.activity;
  const parts: Array<HTMLElement | null> = [
    h('h2', {}, running ? 'Now' : 'Last trainer log'),
    running
      ? h(
          'p',
          { 'data-now': stage ?? '' },
          `Iteration ${iteration}, stage ${stage ?? '–'}`,
          activity?.done !== undefined && activity.total !== undefined
            ? ` (${activity.type}: ${activity.done} of ${activity.total})`
            : activity
              ? ` (${activity.type}, attempt ${activity.attempt})`
              : '',
        )
      : null,
    rollouts && rollouts.items.length > 0
      ? h(
          'p',
          { 'data-running-rollouts': String(rollouts.items.length) },
          'Running: ',
          ...rollouts.items.flatMap((r, i) => [
            i > 0 ? ', ' : '',
            link(`#/rollouts/${enc(r.rolloutId)}`, r.rolloutId, { 'data-rollout': r.rolloutId }),
          ]),
          rollouts.next ? ' …' : '',
        )
      : null,
    log ? updateLogView(log, running && stage === 'update') : h('p', { class: 'muted' }, 'No trainer log yet.'),
  ];
  section.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
  const pre = section.querySelector('pre');
  if (pre) pre.scrollTop = pre.scrollHeight;
}

/** The trainer log of `iteration`, or of the one before when its update has not begun; null when neither has one. */
async function latestUpdateLog(runId: string, iteration: number): Promise<UpdateLog | null> {
  for (const n of [iteration, iteration - 1]) {
    if (n < 1) continue;
    try {
      return await get<UpdateLog>(`/api/runs/${enc(runId)}/iterations/${n}/log`);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
    }
  }
  return null;
}

function updateLogView(log: UpdateLog, open: boolean): HTMLElement {
  return h(
    'details',
    { open, 'data-update-log': String(log.iteration) },
    h(
      'summary',
      {},
      `Trainer log of iteration ${log.iteration}`,
      log.cutBytes > 0 ? ` (its first ${log.cutBytes} bytes left out)` : '',
    ),
    h('pre', { class: 'log' }, log.text || '(empty)'),
  );
}
