import { ApiError, enc, post } from './api.js';
import { h } from './dom.js';

/**
 * Actions from the page, through the API's own routes (so with the rules and the audit trail every client gets):
 * a button runs one, the outcome is said in the flash line above the page (kept across the page's refresh), and
 * the page is drawn again. Questions (are you sure, why) are asked in the page, never in a blocking dialog.
 */
export function actionButton(
  label: string,
  attributes: Record<string, string>,
  act: () => Promise<string>,
  confirmation?: string,
): HTMLElement {
  const button = h('button', { type: 'button', class: 'action', ...attributes }, label) as HTMLButtonElement;
  const run = () => {
    button.disabled = true;
    void settle(act(), () => (button.disabled = false));
  };
  button.addEventListener('click', () => (confirmation ? ask(button, confirmation, run) : run()));
  return button;
}

/** Replaces the button with the question and Yes / No until answered. */
function ask(button: HTMLElement, question: string, yes: () => void): void {
  const asking = h(
    'span',
    { class: 'confirm', 'data-confirm': '' },
    `${question} `,
    h('button', { type: 'button', 'data-confirm-yes': '', onclick: () => (asking.replaceWith(button), yes()) }, 'Yes'),
    ' ',
    h('button', { type: 'button', 'data-confirm-no': '', onclick: () => asking.replaceWith(button) }, 'No'),
  );
  button.replaceWith(asking);
}

/** An inline form asking for a reason (recorded with the move), then running the action with it. */
function reasonForm(prompt: string, submit: string, act: (reason: string) => Promise<string>, required: boolean) {
  const input = h('input', { name: 'reason', size: 40, required }) as HTMLInputElement;
  const form = h(
    'form',
    { class: 'reason', 'data-reason-form': '' },
    `${prompt} `,
    input,
    ' ',
    h('button', {}, submit),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void settle(act(input.value.trim()));
  });
  return form;
}

/**
 * Says how an action ended in the flash line: what it did (and the page is drawn again), or why it was refused
 * (then `refused` runs, to offer what may be done instead).
 */
async function settle(action: Promise<string>, refused?: (err: Error) => void): Promise<void> {
  try {
    say(await action);
    redraw();
  } catch (err) {
    say((err as Error).message, true);
    refused?.(err as Error);
  }
}

/** Whether the page has a question of an action open (a confirmation, a reason asked for). */
export const asking = (root: HTMLElement): boolean => root.querySelector('[data-confirm], [data-reason-form]') !== null;

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
    actionButton(
      label,
      { 'data-action': name },
      async () => {
        await post(`${run}/${name}`);
        return `${label}: asked of run ${runId}.`;
      },
      question,
    );
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
 * CLI's `rein promote`. Refused, the page says why and offers an override, with a reason that is recorded.
 */
export function promoteButton(version: string): HTMLElement {
  const path = `/api/policies/${enc(version)}/promote`;
  const button = h('button', { type: 'button', class: 'action', 'data-promote': version }, 'Promote');
  button.addEventListener('click', () => {
    const promoted = post(path, {}).then(() => `Production now serves ${version}.`);
    void settle(promoted, (err) => {
      if (!(err instanceof ApiError) || err.code !== 'promotion_refused') return;
      const form = reasonForm(
        'Promote anyway, as an override (recorded) — reason:',
        'Promote with override',
        async (reason) => {
          await post(path, { override: { reason } });
          return `Production now serves ${version} (override: ${reason}).`;
        },
        true,
      );
      form.dataset.override = version;
      button.replaceWith(form);
    });
  });
  return button;
}

/** Moves production back to the version it served before, with a reason for the record. */
export function rollbackButton(current: string): HTMLElement {
  const button = h('button', { type: 'button', class: 'action', 'data-rollback': current }, 'Roll back production');
  button.addEventListener('click', () =>
    button.replaceWith(
      reasonForm(
        `Roll production back from ${current}? Why (recorded; may be empty):`,
        'Roll back',
        async (reason) => {
          const move = await post<{ change: { to: string } }>(
            '/api/production/rollback',
            reason ? { reason } : undefined,
          );
          return `Production rolled back from ${current} to ${move.change.to}.`;
        },
        false,
      ),
    ),
  );
  return button;
}
