import { asking, promoteButton, runActions } from '../actions.js';
import { enc, get } from '../api.js';
import { iterationChart, type Series } from '../charts.js';
import { facts, h, json, link, num, pct, table, verdict, when } from '../dom.js';
import type { PageContext } from '../page.js';
import type { Aliases, IterationView, RunConfigView, RunReport, RunView } from '../types.js';
import { refreshLive } from './run-live.js';
import { rolloutsHref } from './run-rollouts.js';
import { environmentSection } from './run-variants.js';

/** How often a running run's page asks again. */
const POLL_MS = 3000;

/** A run: its curves per iteration, the gate's verdicts and links to its workflows; refreshed while it runs. */
export async function runPage(context: PageContext, runId: string): Promise<void> {
  let shown = '';
  // A run's config never changes: read once.
  const config = await get<RunConfigView>(`/api/runs/${enc(runId)}/config`).catch((err: Error) => err.message);
  for (;;) {
    const [report, view, aliases] = await Promise.all([
      get<RunReport>(`/api/runs/${enc(runId)}`),
      get<RunView>(`/api/runs/${enc(runId)}/iterations`),
      get<Aliases>('/api/aliases'),
    ]);
    if (context.left()) return;
    // Charts are drawn again only when a number changed, so a page being read does not jump.
    const production = aliases.aliases.production;
    const snapshot = JSON.stringify([report.status, report.execution, report.activity, view, production]);
    // Not while a question of an action is open (are you sure, why): drawing again would take it away mid-answer.
    if (snapshot !== shown && !asking(context.root)) {
      shown = snapshot;
      context.root.replaceChildren(...render(report, view, production), configSection(config));
    }
    const live = context.root.querySelector<HTMLElement>('#live');
    if (live && !asking(context.root)) await refreshLive(live, report);
    if (context.left()) return;
    if (report.execution !== 'RUNNING' && snapshot === shown) return;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    if (context.left()) return;
  }
}

function render(report: RunReport, view: RunView, production: string | undefined): HTMLElement[] {
  const charts = iterationCharts(view.iterations);
  return [
    h('h1', {}, `Run ${report.runId}`),
    runFacts(report, view, production),
    runActions(report.runId, runState(report)),
    h('section', { id: 'live' }),
    h(
      'p',
      {},
      link(rolloutsHref(report.runId), 'All rollouts of this run', { 'data-rollouts': '' }),
      ' (training and held-out, by iteration, task, reward, failure class, merge cause)',
    ),
    h('h2', {}, 'Per iteration'),
    h('div', { class: 'charts' }, charts),
    h('h2', {}, 'Per optimizer step'),
    h('div', { class: 'charts' }, stepCharts(view.iterations)),
    ...failureReasons(view.iterations),
    h('h2', {}, 'Gate verdicts'),
    gateVerdicts(report.runId, view.iterations, production),
    ...environmentSection(view.iterations),
  ];
}

/** Why rollouts failed: one rollout's reason per class, of the latest iteration that recorded any. */
function failureReasons(its: IterationView[]): HTMLElement[] {
  const reasons = (i: IterationView) => [
    ...Object.entries(i.failureReasons?.train ?? {}).map(([kind, why]) => ['training rollouts', kind, why]),
    ...Object.entries(i.failureReasons?.heldout ?? {}).map(([kind, why]) => ['held-out replay', kind, why]),
  ];
  const latest = its.findLast((i) => reasons(i).length > 0);
  if (!latest) return [];
  return [
    h('h2', {}, `Why rollouts failed in iteration ${latest.iteration}`),
    table(['stage', 'failure class', "one rollout's reason"], reasons(latest), { id: 'failure-reasons' }),
  ];
}

/** The trainer's numbers, one chart each: the field, its label and its unit. */
const TRAINER_CHARTS: Array<[keyof IterationView['trainer'], string, string]> = [
  ['loss', 'loss', 'loss per token'],
  ['approxKl', 'approx KL', 'nats per token'],
  ['clipFraction', 'clip fraction', 'share of tokens'],
  ['entropy', 'entropy', 'nats per token'],
  ['gradNorm', 'grad norm', 'L2 norm'],
];

/**
 * The trainer's numbers at every optimizer step of every iteration, steps counted across the run (drag to zoom into
 * one iteration; the export says which iteration and epoch each step was).
 */
function stepCharts(its: IterationView[]): HTMLElement[] {
  const steps = its.flatMap((i) => i.trainerSteps.map((s) => ({ ...s, iteration: i.iteration })));
  const xs = steps.map((_, n) => n + 1);
  const none = 'No step recorded yet: the trainer records each step once an update finishes.';
  return [
    ...TRAINER_CHARTS.map(([key, label, unit]) =>
      iterationChart(`step-${key}`, `Each step: ${label}`, xs, [{ label, values: steps.map((s) => s[key]) }], {
        unit,
        x: 'step',
        none,
      }),
    ),
    iterationChart(
      'step-place',
      'Each step: iteration and epoch',
      xs,
      [
        { label: 'iteration', values: steps.map((s) => s.iteration) },
        { label: 'epoch', values: steps.map((s) => s.epoch + 1) },
      ],
      { unit: 'number', x: 'step', none },
    ),
  ];
}

/**
 * One chart per measure over the iterations: rewards, held-out success, the trainer's numbers, tokens, stage times,
 * failures.
 */
function iterationCharts(its: IterationView[]): HTMLElement[] {
  const xs = its.map((i) => i.iteration);
  const values = (pick: (i: IterationView) => number | null | undefined) => its.map((i) => pick(i) ?? null);
  const keyed = (records: (i: IterationView) => Record<string, number>, prefix = ''): Series[] => {
    const keys = [...new Set(its.flatMap((i) => Object.keys(records(i))))].sort();
    return keys.map((k) => ({ label: `${prefix}${k}`, values: its.map((i) => records(i)[k] ?? 0) }));
  };
  return [
    iterationChart(
      'reward',
      'Training mean reward',
      xs,
      [{ label: 'mean reward', values: values((i) => i.meanReward) }],
      {
        unit: 'reward',
      },
    ),
    iterationChart(
      'heldout',
      "Held-out success: candidate and production (band: the gate's interval)",
      xs,
      [
        { label: 'candidate', values: values((i) => i.heldout.candidate) },
        { label: 'production', values: values((i) => i.heldout.production) },
        { label: 'interval high', values: values((i) => i.heldout.upper) },
        { label: 'interval low', values: values((i) => i.heldout.lower) },
      ],
      { unit: 'tasks accepted', band: [3, 4], percent: true },
    ),
    ...TRAINER_CHARTS.map(([key, label, unit]) =>
      iterationChart(key, `Trainer: ${label}`, xs, [{ label, values: values((i) => i.trainer[key]) }], { unit }),
    ),
    iterationChart(
      'logprob-gap',
      "Behaviour vs trainer log-probs: |Δ| over trained tokens (the parent's, before its update)",
      xs,
      [
        { label: 'mean |Δ|', values: values((i) => i.trainerLogprobs?.meanAbsDiff) },
        { label: 'max |Δ|', values: values((i) => i.trainerLogprobs?.maxAbsDiff) },
      ],
      { unit: 'nats', none: 'Not recorded: the trainer of these iterations predates it.' },
    ),
    iterationChart(
      'tokens',
      'Tokens',
      xs,
      [
        { label: 'rollouts', values: values((i) => i.tokens.rollouts) },
        { label: 'trained', values: values((i) => i.tokens.trained) },
      ],
      { unit: 'tokens' },
    ),
    iterationChart(
      'stages',
      'Elapsed seconds per stage',
      xs,
      keyed((i) => i.stageSeconds),
      { unit: 'seconds' },
    ),
    iterationChart(
      'failures',
      'Failures by class (train, held-out candidate)',
      xs,
      [...keyed((i) => i.failures.train, 'train: '), ...keyed((i) => i.failures.heldout, 'held-out: ')],
      { unit: 'rollouts', none: 'No failed rollouts.' },
    ),
  ];
}

/**
 * The run at a glance: state, stage and activity, policy, held-out reward, problems, and its workflow in Temporal's Web
 * UI.
 */
function runFacts(report: RunReport, view: RunView, production: string | undefined): HTMLElement {
  const status = report.status;
  const activity = report.activity;
  return facts([
    ['State', h('span', { 'data-state': runState(report) }, runState(report))],
    [
      'Stage',
      `${status?.stage ?? '–'}${activity ? ` — ${activity.type}${activity.total ? ` ${activity.done ?? 0}/${activity.total}` : ''}${activity.waiting ? `, waiting: ${activity.waiting}` : ''}` : ''}`,
    ],
    ...(status?.rolloutsAhead
      ? [
          [
            'Pipeline',
            h('span', { 'data-pipeline': status.rolloutsAhead.workflowId }, [
              `iteration ${status.rolloutsAhead.iteration - 1} trains ${status.policyVersion} (batch, update, held-out)`,
              ' ‖ ',
              `iteration ${status.rolloutsAhead.iteration}'s rollouts sample ${status.rolloutsAhead.policyVersion}`,
            ]),
          ] as [string, HTMLElement],
        ]
      : []),
    [
      'Production',
      h('span', { 'data-production': production ?? '' }, production ?? 'the base policy (never promoted)'),
    ],
    ['Trains from', h('span', { 'data-trains-from': status?.policyVersion ?? '' }, trainsFrom(status, view))],
    [
      'Held-out mean reward',
      status?.heldout
        ? `${num(status.heldout.base.meanReward)} (${status.heldout.base.policyVersion}) → ${num(status.heldout.latest?.meanReward)} (${status.heldout.latest?.policyVersion ?? '–'})`
        : '–',
    ],
    ['Started', when(report.startTime)],
    ...(report.problem ? [['Problem', h('span', { class: 'error' }, report.problem)] as [string, HTMLElement]] : []),
    ...(activity?.lastFailure
      ? [['Last failure', h('span', { class: 'error' }, activity.lastFailure)] as [string, HTMLElement]]
      : []),
    [
      'Temporal',
      view.workflowUrl
        ? link(view.workflowUrl, 'the run in the Web UI', { target: '_blank' })
        : h('span', { class: 'muted' }, 'Web UI address not known (headless dev server or a remote Temporal)'),
    ],
  ]);
}

/** The version the run trains from next, and whether its gate let it serve (a refused candidate still trains on). */
function trainsFrom(status: RunReport['status'], view: RunView): string {
  const version = status?.policyVersion;
  if (!version) return '–';
  const gate = view.iterations.find((i) => i.candidate === version)?.gate;
  if (!gate) return `${version}${view.iterations.some((i) => i.candidate === version) ? ' (not gated)' : ''}`;
  return `${version} (${gate.promoted ? 'promoted' : `gate ${gate.verdict}, not promoted`})`;
}

/** "v0 (1 behind: 8)": the version an iteration's samples came from, with their staleness when any was stale. */
function samplesFrom(i: IterationView): string {
  const stale = Object.entries(i.samples.keptByVersionsBehind).filter(([behind]) => behind !== '0');
  const staleness = stale.map(([behind, n]) => `${behind} behind: ${n}`).join(', ');
  return `${i.samples.sampledFrom ?? '–'}${staleness ? ` (${staleness})` : ''}`;
}

/**
 * Each iteration's candidate, held-out success, the gate's verdict (a link to its decision) and reasons, its
 * workflows, and a way to promote the candidate.
 */
function gateVerdicts(runId: string, its: IterationView[], production: string | undefined): HTMLElement {
  return table(
    [
      'It',
      'Candidate',
      'Samples from',
      'Held-out (candidate / production)',
      'Verdict',
      'Promoted',
      'Reasons',
      'Workflows',
      'Production',
    ],
    its.map((i) => [
      link(rolloutsHref(runId, { iteration: String(i.iteration) }), String(i.iteration), {
        'data-iteration-rollouts': i.iteration,
      }),
      i.candidate ?? '–',
      samplesFrom(i),
      `${pct(i.heldout.candidate)} / ${pct(i.heldout.production)}`,
      i.gate
        ? h(
            'a',
            { href: `#/decisions/${enc(i.gate.decisionId)}`, 'data-decision': i.gate.decisionId },
            verdict(i.gate.verdict),
          )
        : i.failed
          ? h('span', { class: 'fail' }, `failed: ${i.failed}`)
          : '–',
      i.gate ? (i.gate.promoted ? 'yes' : 'no') : '–',
      i.gate && i.gate.reasons.length > 0
        ? h(
            'ul',
            {},
            i.gate.reasons.map((r) => h('li', {}, r)),
          )
        : '–',
      i.workflows.map((w) =>
        h(
          'div',
          {},
          w.url
            ? link(w.url, w.label, { target: '_blank', 'data-workflow': w.workflowId })
            : h('span', { 'data-workflow': w.workflowId }, w.workflowId),
        ),
      ),
      !i.candidate ? '–' : i.candidate === production ? 'serves it' : promoteButton(i.candidate),
    ]),
    { id: 'iterations' },
  );
}

/** The config the run was started with (redacted), folded: what a comparison diffs. */
function configSection(config: RunConfigView | string): HTMLElement {
  return h(
    'section',
    { id: 'config' },
    h('h2', {}, 'Config'),
    typeof config === 'string'
      ? h('p', { class: 'error' }, config)
      : h(
          'details',
          {},
          h('summary', {}, `The config it was started with (hash ${config.configHash}; secrets redacted)`),
          json(config.config),
        ),
  );
}

/**
 * The run's state in the status's words (running, paused, finished, cancelled…); a run that ended before it recorded
 * any progress has no status, and its execution says the same in Temporal's capitals (CANCELLED → cancelled).
 */
const runState = (report: RunReport): string => report.status?.state ?? report.execution.toLowerCase();
