import { ApiError, enc, post } from './api.js';
import { h } from './dom.js';

/**
 * Actions from the page, through the API's own routes (so with the rules and the audit trail every client gets):
 * a button runs one, the outcome is said in the flash line above the page (kept across the page's refresh), and
 * the page is drawn again.
 */
export function actionButton(label: string, attributes: Record<string, string>, act: () => Promise<string | null>) {
  const button = h('button', { type: 'button', class: 'action', ...attributes }, label) as HTMLButtonElement;
  button.addEventListener('click', () => {
    button.disabled = true;
    act().then(
      (done) => {
        if (done !== null) say(done);
        redraw();
      },
      (err: Error) => {
        say(err.message, true);
        button.disabled = false;
      },
    );
  });
  return button;
}

/** The flash line: what the last action did, or why it was refused. */
export function say(message: string, failed = false): void {
  const flash = document.getElementById('flash') as HTMLElement;
  flash.textContent = message;
  flash.className = failed ? 'error' : 'done';
  flash.dataset.outcome = failed ? 'refused' : 'done';
  flash.hidden = false;
}

/** Draws the page again (main.ts renders on hashchange), as its own refresh would. */
const redraw = () => window.dispatchEvent(new Event('hashchange'));

/** The run's state as its status names it, and the actions it allows now. */
export function runActions(runId: string, state: string): HTMLElement {
  const run = `/api/runs/${enc(runId)}`;
  const signal = (name: string, label: string, question?: string) =>
    actionButton(label, { 'data-action': name }, async () => {
      if (question && !confirm(question)) return null;
      await post(`${run}/${name}`);
      return `${label}: asked of run ${runId}.`;
    });
  const cancel = signal('cancel', 'Cancel', `Cancel run ${runId} now? Its current iteration's work is cancelled.`);
  const buttons: Record<string, HTMLElement[]> = {
    running: [
      signal('pause', 'Pause'),
      signal('stop', 'Stop after this iteration', `Stop run ${runId} once its current iteration ends?`),
      cancel,
    ],
    paused: [signal('resume', 'Resume'), cancel],
    stopping: [cancel],
  };
  const ended = ['failed', 'cancelled', 'terminated', 'timed_out'].includes(state);
  const shown = ended ? [signal('resume', 'Continue from its first unfinished iteration')] : (buttons[state] ?? []);
  return h('p', { class: 'actions', 'data-actions': state }, shown);
}

/**
 * Promotes a version to production: behind a passing gate decision against what production serves now, as the
 * CLI's `rein promote`; refused, the page says why and asks whether to override, with a reason that is recorded.
 */
export function promoteButton(version: string): HTMLElement {
  return actionButton('Promote', { 'data-promote': version }, async () => {
    const path = `/api/policies/${enc(version)}/promote`;
    try {
      await post(path, {});
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'promotion_refused') throw err;
      const reason = prompt(`${err.message}\n\nPromote anyway? The override and its reason are recorded. Reason:`);
      if (!reason?.trim()) return `Not promoted: ${err.message}`;
      await post(path, { override: { reason: reason.trim() } });
      return `Production now serves ${version} (override: ${reason.trim()}).`;
    }
    return `Production now serves ${version}.`;
  });
}

/** Moves production back to the version it served before, with a reason for the record. */
export function rollbackButton(current: string): HTMLElement {
  return actionButton('Roll back production', { 'data-rollback': current }, async () => {
    const reason = prompt(`Roll production back from ${current}? Why (recorded; leave empty for none):`);
    if (reason === null) return null;
    const move = await post<{ change: { to: string } }>(
      '/api/production/rollback',
      reason.trim() ? { reason: reason.trim() } : undefined,
    );
    return `Production rolled back from ${current} to ${move.change.to}.`;
  });
}
