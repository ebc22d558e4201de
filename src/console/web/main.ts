import { ApiError, forgetKey, get, saveKey, storedKey } from './api.js';
import { h } from './dom.js';
import type { Page, PageContext } from './page.js';
import { comparePage } from './pages/compare.js';
import { decisionPage } from './pages/decision.js';
import { releasesPage } from './pages/releases.js';
import { rolloutPage } from './pages/rollout.js';
import { runPage } from './pages/run.js';
import { runRolloutsPage } from './pages/run-rollouts.js';
import { runsPage } from './pages/runs.js';
import { tokensPage } from './pages/tokens.js';

/** Hash routes: the key never travels in a URL, and the server serves one page. */
const ROUTES: Array<[RegExp, Page]> = [
  [/^#\/runs\/([^/?]+)$/, runPage],
  // The filters ride after `?` in the hash; the page reads them itself.
  [/^#\/runs\/([^/?]+)\/rollouts(?:\?.*)?$/, runRolloutsPage],
  [/^#\/runs\/([^/?]+)\/iterations\/(\d+)\/tokens\?.*$/, tokensPage],
  [/^#\/decisions\/([^/]+)$/, decisionPage],
  [/^#\/rollouts\/([^/]+)$/, rolloutPage],
  [/^#\/releases$/, releasesPage],
  [/^#\/compare(?:\?.*)?$/, comparePage],
  [/^#?\/?(runs)?(?:\?.*)?$/, runsPage],
];

let visit = 0;
/** The address last drawn: the flash line (an action's outcome) stays while the page is drawn again, not after. */
let drawn = '';

/** Seconds before a page whose data could not be fetched tries again, by try (the last one repeats). */
const RETRY_SECONDS = [2, 5, 10, 30];

async function render(failedTries = 0): Promise<void> {
  const root = document.getElementById('page') as HTMLElement;
  const mine = ++visit;
  const context: PageContext = { root, left: () => mine !== visit };
  (document.getElementById('logout') as HTMLElement).hidden = !storedKey();
  if (!storedKey()) return login(root);
  const hash = location.hash || '#/runs';
  if (hash !== drawn) (document.getElementById('flash') as HTMLElement).hidden = true;
  drawn = hash;
  const found = ROUTES.map(([pattern, page]) => [pattern.exec(hash), page] as const).find(([match]) => match);
  root.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  try {
    if (!found) throw new Error(`no page ${hash}`);
    const [match, page] = found;
    await page(
      context,
      ...match!
        .slice(1)
        .filter((p): p is string => p !== undefined && p !== 'runs')
        .map(decodeURIComponent),
    );
  } catch (err) {
    if (context.left()) return;
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
      forgetKey();
      return login(root, err.message);
    }
    if (!found) root.replaceChildren(h('p', { class: 'error', 'data-error': '' }, (err as Error).message));
    else showFailure(root, context, (err as Error).message, failedTries);
  }
}

/**
 * Why the page could not be shown, and that it tries again by itself (a server restarting, a
 * network blip) or at once on demand; a try that succeeds shows the page as if nothing happened.
 */
function showFailure(root: HTMLElement, context: PageContext, message: string, failedTries: number): void {
  const seconds = RETRY_SECONDS[Math.min(failedTries, RETRY_SECONDS.length - 1)] as number;
  const retry = h('button', { type: 'button', 'data-retry': '' }, 'Retry now');
  retry.addEventListener('click', () => void render(failedTries + 1));
  root.replaceChildren(
    h('p', { class: 'error', 'data-error': '' }, message),
    h('p', { class: 'muted', 'data-retrying': String(seconds) }, `Trying again in ${seconds} s. `, retry),
  );
  setTimeout(() => {
    if (!context.left()) void render(failedTries + 1);
  }, seconds * 1000);
}

/** The admin key, asked once per tab and kept in sessionStorage. */
function login(root: HTMLElement, problem?: string): void {
  const input = h('input', {
    type: 'password',
    name: 'key',
    autocomplete: 'current-password',
    placeholder: 'rein-admin-…',
    required: true,
  }) as HTMLInputElement;
  const message = h('p', { class: 'error' }, problem ?? '');
  const form = h(
    'form',
    { class: 'login', id: 'login' },
    h('h1', {}, 'Rein console'),
    h('label', {}, "The gateway's admin key (the file `rein dev` names, or REIN_GATEWAY_ADMIN_KEY)"),
    input,
    h('button', { type: 'submit' }, 'Open'),
    message,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const key = input.value.trim();
    get('/api/runs?limit=1', key).then(
      () => {
        saveKey(key);
        void render();
      },
      (err: Error) => {
        message.textContent = loginProblem(err);
      },
    );
  });
  root.replaceChildren(form);
}

/** Why a key could not open the console, and what to do. */
function loginProblem(err: Error): string {
  if (err instanceof ApiError && (err.status === 401 || err.status === 403))
    return `That key was refused (${err.status}: ${err.message}): it is not this server's admin key. Use the key in the file \`rein dev\` names, or the value of REIN_GATEWAY_ADMIN_KEY where Rein runs.`;
  if (err instanceof ApiError) return `The server answered ${err.status}: ${err.message}`;
  return `Could not reach Rein's API at ${location.origin} (${err.message}): is \`rein dev\` or \`rein api\` running?`;
}

document.getElementById('logout')?.addEventListener('click', () => {
  forgetKey();
  void render();
});
window.addEventListener('hashchange', () => void render());
void render();
