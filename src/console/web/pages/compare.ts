import { addressParams } from '../address.js';
import { enc, get } from '../api.js';
import { iterationChart, type Series } from '../charts.js';
import { configDiff } from '../config-diff.js';
import { h, link, num, table } from '../dom.js';
import type { PageContext } from '../page.js';
import type { DecisionPair, IterationView, Items, RunConfigView, RunView } from '../types.js';

/** The comparison's address: `#/compare?runs=a,b`. */
export const compareHref = (runIds: readonly string[]) => `#/compare?runs=${runIds.map(enc).join(',')}`;

/** What the page reads of one run. */
interface Compared {
  runId: string;
  view: RunView;
  config: RunConfigView | { problem: string };
  /** Its latest gate's held-out pairs (the candidate's side is this run's), and that decision. */
  heldout: { decisionId: string; pairs: DecisionPair[] } | null;
}

/** Two or more runs side by side: their curves overlaid, their configs diffed, their held-out results by task. */
export async function comparePage({ root }: PageContext): Promise<void> {
  const runIds = (addressParams().get('runs') ?? '')
    .split(',')
    .map((id) => id.trim())
    .filter(Boolean);
  if (runIds.length < 2) {
    root.replaceChildren(
      h('h1', {}, 'Compare runs'),
      h('p', { class: 'muted', 'data-empty': '' }, 'Pick two or more runs on the ', link('#/runs', 'runs page'), '.'),
    );
    return;
  }
  const runs = await Promise.all(runIds.map(compared));
  root.replaceChildren(
    h('h1', {}, 'Compare runs'),
    h(
      'p',
      {},
      runs.flatMap((r, i) => [i > 0 ? ' vs ' : '', link(`#/runs/${enc(r.runId)}`, r.runId, { 'data-run': r.runId })]),
    ),
    h('h2', {}, 'Per iteration'),
    h('div', { class: 'charts' }, curves(runs)),
    h('h2', {}, 'Config'),
    ...configSection(runs),
    h('h2', {}, 'Held-out tasks, paired'),
    ...heldoutSection(runs),
  );
}

async function compared(runId: string): Promise<Compared> {
  const [view, config] = await Promise.all([
    get<RunView>(`/api/runs/${enc(runId)}/iterations`),
    get<RunConfigView>(`/api/runs/${enc(runId)}/config`).catch((err: Error) => ({ problem: err.message })),
  ]);
  const decisionId = view.iterations.findLast((i) => i.gate)?.gate?.decisionId;
  const heldout = decisionId
    ? { decisionId, pairs: (await get<Items<DecisionPair>>(`/api/decisions/${enc(decisionId)}/pairs`)).items }
    : null;
  return { runId, view, config, heldout };
}

/** A measure per run, over the iterations any of them reached. */
const MEASURES: Array<[string, string, string, (i: IterationView) => number | null, boolean?]> = [
  ['reward', 'Training mean reward', 'reward', (i) => i.meanReward],
  ['heldout', 'Held-out success of the candidate', 'tasks accepted', (i) => i.heldout.candidate, true],
  ['loss', 'Trainer: loss', 'loss per token', (i) => i.trainer.loss],
  ['approxKl', 'Trainer: approx KL', 'nats per token', (i) => i.trainer.approxKl],
  ['entropy', 'Trainer: entropy', 'nats per token', (i) => i.trainer.entropy],
  ['trained', 'Tokens trained', 'tokens', (i) => i.tokens.trained],
];

function curves(runs: Compared[]): HTMLElement[] {
  const last = Math.max(0, ...runs.flatMap((r) => r.view.iterations.map((i) => i.iteration)));
  const xs = Array.from({ length: last }, (_, k) => k + 1);
  return MEASURES.map(([id, title, unit, pick, percent]) => {
    const series: Series[] = runs.map((r) => ({
      label: r.runId,
      values: xs.map((x) => {
        const it = r.view.iterations.find((i) => i.iteration === x);
        return it ? pick(it) : null;
      }),
    }));
    return iterationChart(`compare-${id}`, title, xs, series, { unit, ...(percent && { percent }) });
  });
}

function configSection(runs: Compared[]): HTMLElement[] {
  const missing = runs.filter((r) => 'problem' in r.config);
  if (missing.length > 0)
    return missing.map((r) =>
      h('p', { class: 'error' }, `${r.runId}'s config: ${(r.config as { problem: string }).problem}`),
    );
  const configs = runs.map((r) => r.config as RunConfigView);
  const { differences, same } = configDiff(configs.map((c) => c.config));
  const hashes = configs.map((c) => c.configHash);
  if (differences.length === 0)
    return [h('p', { 'data-config-same': hashes[0] ?? '' }, `The same config (hash ${hashes[0]}): ${same} settings.`)];
  return [
    h(
      'p',
      { 'data-config-differs': differences.length },
      `${differences.length} setting${differences.length === 1 ? ' differs' : 's differ'}, ${same} agree (hashes ${hashes.join(', ')}).`,
    ),
    table(
      ['Setting', ...runs.map((r) => r.runId)],
      differences.map((d) => [h('code', {}, d.path), ...d.values.map((v) => (v === null ? '(not set)' : v))]),
      { id: 'config-diff' },
    ),
  ];
}

/**
 * Each held-out task sample: whether each run's latest candidate solved it, and its reward, linked to the rollout. A
 * run with no gate decision yet has nothing to pair.
 */
function heldoutSection(runs: Compared[]): HTMLElement[] {
  if (runs.every((r) => !r.heldout)) return [h('p', { class: 'muted' }, 'No run has a gate decision yet.')];
  const key = (p: DecisionPair) => `${p.taskId}\u0000${p.sample}`;
  const byRun = runs.map((r) => new Map((r.heldout?.pairs ?? []).map((p) => [key(p), p])));
  const keys = [...new Set(byRun.flatMap((m) => [...m.keys()]))].sort();
  const rows = keys.map((k) => {
    const [taskId, sample] = k.split('\u0000') as [string, string];
    const cells = byRun.map((m, i) => {
      const p = m.get(k);
      if (!p) return h('span', { class: 'muted' }, runs[i]!.heldout ? 'not replayed' : 'no gate yet');
      const ok = solved(p);
      return h(
        'span',
        { 'data-solved': String(ok) },
        link(`#/rollouts/${enc(p.candidate.rolloutId)}`, ok === null ? 'unscored' : ok ? 'solved' : 'failed'),
        ` (${num(p.candidate.reward)})`,
      );
    });
    return [taskId, sample, ...cells];
  });
  const counts = runs.map((r, i) => (r.heldout ? String(keys.filter((k) => solved(byRun[i]!.get(k))).length) : '–'));
  return [
    h(
      'p',
      { 'data-heldout-counts': counts.join(',') },
      `Solved by each run's latest candidate, of ${keys.length} task samples: `,
      runs.map((r, i) => `${r.runId} ${counts[i]}`).join(', '),
      runs.length === 2 && runs.every((r) => r.heldout) ? `; ${pairSummary(keys, byRun)}.` : '.',
    ),
    table(['Task', 'Sample', ...runs.map((r) => r.runId)], rows, { id: 'heldout-paired' }),
  ];
}

/** Whether a run's candidate solved the task sample: null when not replayed or not scored. */
const solved = (p: DecisionPair | undefined) =>
  p === undefined || p.outcome === 'unscored' ? null : p.outcome === 'both' || p.outcome === 'gained';

/** For two runs: the task samples both solved, only one, neither. */
function pairSummary(keys: string[], byRun: Array<Map<string, DecisionPair>>): string {
  const [a, b] = byRun as [Map<string, DecisionPair>, Map<string, DecisionPair>];
  let both = 0;
  let onlyA = 0;
  let onlyB = 0;
  let neither = 0;
  for (const k of keys) {
    const [x, y] = [solved(a.get(k)), solved(b.get(k))];
    if (x === null || y === null) continue;
    if (x && y) both++;
    else if (x) onlyA++;
    else if (y) onlyB++;
    else neither++;
  }
  return `both ${both}, only the first ${onlyA}, only the second ${onlyB}, neither ${neither}`;
}
