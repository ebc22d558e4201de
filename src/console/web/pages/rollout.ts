import { FAILURE_CLASS_TABLE } from '../../../rollouts/failure-classes.js';
import { verifiedRewardEvent } from '../../../rollouts/rewards.js';
import { enc, get } from '../api.js';
import { facts, h, json, link, ms, num, table, when } from '../dom.js';
import type { PageContext } from '../page.js';
import type { Call, RolloutEvent, RolloutView } from '../types.js';
import { tokensHref } from './tokens.js';
import { rolloutsHref } from './run-rollouts.js';

interface Message {
  role?: string;
  content?: unknown;
  tool_calls?: Array<{ id?: string; function?: { name?: string; arguments?: string } }>;
  tool_call_id?: string;
  name?: string;
}

/**
 * A rollout as the harness saw it: the conversation, tool spans, rewards, failure evidence, logs and each model call.
 */
export async function rolloutPage(context: PageContext, rolloutId: string): Promise<void> {
  let shown = '';
  for (;;) {
    const view = await get<RolloutView>(`/api/rollouts/${enc(rolloutId)}`);
    if (context.left()) return;
    // Drawn again only when something changed: a running rollout's calls, events and log as they come.
    const snapshot = JSON.stringify(view);
    if (snapshot !== shown) {
      shown = snapshot;
      draw(context.root, view);
    }
    if (view.rollout.status !== 'running' && view.rollout.status !== 'queued') return;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    if (context.left()) return;
  }
}

/** How often the page of a rollout that is still running asks again. */
const POLL_MS = 3000;

function draw(root: HTMLElement, view: RolloutView): void {
  const { rollout, calls, events } = view;
  root.replaceChildren(
    h('h1', {}, `Rollout ${rollout.id}`),
    rolloutFacts(view),
    h('h2', {}, 'Reward components'),
    rewardComponents(events, rollout.attempts),
    ...failure(events),
    h('h2', {}, 'Conversation'),
    h('div', { id: 'conversation' }, conversation(calls)),
    h('h2', {}, 'Tool spans'),
    toolSpans(events),
    h('h2', {}, 'Model calls'),
    modelCalls(calls),
    h('h2', {}, 'Logs'),
    ...logs(view),
    h('h2', {}, 'Events'),
    table(
      ['Attempt', 'Type', 'Source', 'At', 'Payload'],
      events.map((e: RolloutEvent) => [String(e.attempt), e.type, e.source, when(e.at), short(e.payload)]),
    ),
  );
}

/**
 * The rollout's task, mode, status, policy, attempts, both rewards (the verifier's and the harness's) and failure
 * class.
 */
function rolloutFacts({ rollout, rewards, outcome, trainedIn, decidedIn }: RolloutView): HTMLElement {
  return facts([
    ['Task', rollout.taskId ?? '–'],
    ['Mode', rollout.mode],
    ...(trainedIn
      ? [
          [
            'Trained in',
            h(
              'span',
              {},
              link(`#/runs/${enc(trainedIn.runId)}`, `run ${trainedIn.runId}, iteration ${trainedIn.iteration}`, {
                'data-run': trainedIn.runId,
              }),
              ' (',
              link(rolloutsHref(trainedIn.runId, { iteration: String(trainedIn.iteration) }), 'its rollouts'),
              '; ',
              link(tokensHref(trainedIn.runId, trainedIn.iteration, rollout.id), 'its tokens as trained', {
                'data-tokens': '',
              }),
              ')',
            ),
          ] as [string, HTMLElement],
        ]
      : []),
    ...(decidedIn.length > 0
      ? [
          [
            'Evidence in',
            h(
              'ul',
              {},
              decidedIn.map((d) =>
                h(
                  'li',
                  {},
                  link(`#/decisions/${enc(d.decisionId)}`, d.decisionId, { 'data-decided-in': d.decisionId }),
                  ` (${d.side}, ${d.verdict})`,
                ),
              ),
            ),
          ] as [string, HTMLElement],
        ]
      : []),
    // How the rollout ended (the harness ran to its end, or failed) is not whether it solved its task: see Outcome.
    [
      'Status',
      h(
        'span',
        { 'data-status': rollout.status },
        `${rollout.status}${rollout.statusReason ? `: ${rollout.statusReason}` : ''}`,
      ),
    ],
    [
      'Outcome',
      h(
        'span',
        {
          class: outcome.accepted === null ? '' : outcome.accepted ? 'pass' : 'fail',
          'data-accepted': String(outcome.accepted),
        },
        outcome.accepted === null
          ? 'not scored'
          : `${outcome.accepted ? 'accepted' : 'not accepted'}: the verifier's reward ${num(rewards.verified)} is ${outcome.accepted ? 'at least' : 'below'} acceptReward ${num(outcome.acceptReward)}`,
      ),
    ],
    ['Policy version', rollout.policyVersion ?? '–'],
    ['Attempts', String(rollout.attempts)],
    ['Reward (verifier)', h('span', { 'data-reward': rewards.verified ?? '' }, num(rewards.verified))],
    [
      'Reward (harness reported)',
      `${num(rewards.reported)}${rewards.disagrees ? ' — disagrees with the verifier' : ''}`,
    ],
    [
      'Failure class',
      rollout.failureClass ? h('span', { title: meaning(rollout.failureClass) }, rollout.failureClass) : '–',
    ],
    ['Started', when(rollout.createdAt)],
  ]);
}

/** The components of the reward the verifier gave the final attempt (the one the batch trains on), if it scored it. */
function rewardComponents(events: RolloutEvent[], attempt: number): HTMLElement {
  const reward = verifiedRewardEvent(events, attempt);
  return reward
    ? table(
        ['Component', 'Value'],
        Object.entries((reward.payload.components ?? {}) as Record<string, number>).map(([k, v]) => [k, num(v)]),
        { id: 'components' },
      )
    : h('p', { class: 'muted' }, 'Not scored.');
}

/** What a failure class means, from the one table of them (the docs show the same). */
function meaning(failureClass: string): string {
  return (FAILURE_CLASS_TABLE as Partial<Record<string, { when: string }>>)[failureClass]?.when ?? '';
}

/**
 * The failure class (with what it means), reason and evidence of the last status event that classed a failure, and a
 * link to the model call the evidence names; nothing if no event classed one.
 */
function failure(events: RolloutEvent[]): HTMLElement[] {
  const failed = events.filter((e) => e.type === 'status' && e.payload.failureClass).at(-1);
  if (!failed) return [];
  const evidence = (failed.payload.evidence ?? {}) as Record<string, unknown>;
  const callId = typeof evidence.callId === 'string' ? evidence.callId : null;
  return [
    h('h2', {}, `Failure: ${String(failed.payload.failureClass)}`),
    h('p', { class: 'muted' }, meaning(String(failed.payload.failureClass))),
    h('p', {}, String(failed.payload.reason ?? '')),
    callId
      ? h(
          'p',
          {},
          'Read from ',
          // The page's routes live in the hash: scroll to the call's row rather than navigate.
          h(
            'a',
            {
              href: '#',
              'data-evidence-call': callId,
              onclick: (e: Event) => {
                e.preventDefault();
                document.getElementById(`call-${callId}`)?.scrollIntoView();
              },
            },
            `model call ${callId}`,
          ),
        )
      : null,
    json(evidence),
  ].filter((e): e is HTMLElement => e !== null);
}

/** The tool calls the harness reported as spans, each with its latency, permission, failure, input and output. */
function toolSpans(events: RolloutEvent[]): HTMLElement {
  const spans = events.filter((e) => e.type === 'span');
  return spans.length === 0
    ? h('p', { class: 'muted' }, 'The harness reported no tool spans.')
    : table(
        ['Tool', 'Kind', 'Latency', 'Permission', 'Failure', 'Input', 'Output'],
        spans.map((s) => [
          String(s.payload.name),
          String(s.payload.kind ?? ''),
          ms(s.payload.latencyMs as number | undefined),
          String(s.payload.permission ?? ''),
          String(s.payload.failure ?? '–'),
          short(s.payload.input),
          short(s.payload.output),
        ]),
        { id: 'spans' },
      );
}

/** Each model call the gateway journaled: its attempt, policy, status, latencies, token counts and error. */
function modelCalls(calls: Call[]): HTMLElement {
  return table(
    [
      '#',
      'Attempt',
      'Policy',
      'Status',
      'Latency',
      'Time to first token',
      'Prompt tokens',
      'Completion tokens',
      'Error',
    ],
    calls.map((c) => [
      h('span', { id: `call-${c.id}` }, String(c.seq)),
      String(c.attempt),
      c.policyVersion,
      c.status,
      ms(c.latencyMs),
      c.stream ? ms(c.ttftMs) : '– (not streamed)',
      num(c.promptTokens),
      num(c.completionTokens),
      c.errorClass ? `${c.errorClass}: ${c.errorMessage ?? ''}` : '–',
    ]),
    { id: 'calls' },
  );
}

/** The harness's and verifier's logs, each saying where it was read from, or why it could not be. */
function logs(view: RolloutView): HTMLElement[] {
  return [
    ...(view.logsProblem
      ? [h('p', { class: 'fail', 'data-logs-problem': '' }, `Uploaded logs could not be read: ${view.logsProblem}`)]
      : []),
    ...(view.logs.length === 0
      ? [
          h(
            'p',
            { class: 'muted' },
            'No harness or verifier log: neither uploaded to the artifact store nor on this machine.',
          ),
        ]
      : view.logs.flatMap((log) => [
          h(
            'h3',
            {},
            `${log.name}${log.truncatedBytes > 0 ? ` (last part; ${log.truncatedBytes} bytes before it)` : ''}${log.source === 'local' ? " (read from this machine's data directory)" : ''}`,
          ),
          log.source === 'missing'
            ? h('p', { class: 'fail', 'data-log-missing': log.name }, log.note ?? 'not uploaded')
            : h('pre', { 'data-log': log.name }, log.text || '(empty)'),
        ])),
  ];
}

/** The last call's messages and its answer: the conversation as the harness had it at the end. */
function conversation(calls: Call[]): HTMLElement[] {
  const last = [...calls].reverse().find((c) => c.status === 'ok') ?? calls.at(-1);
  if (!last) return [h('p', { class: 'muted' }, 'No model calls.')];
  const request = last.requestReceived as { messages?: Message[]; prompt?: unknown };
  const response = last.response as { choices?: Array<{ message?: Message; text?: string }> } | undefined;
  const messages: Message[] = [
    ...(request.messages ?? (request.prompt !== undefined ? [{ role: 'prompt', content: request.prompt }] : [])),
  ];
  const answer = response?.choices?.[0];
  if (answer?.message) messages.push(answer.message);
  else if (answer?.text !== undefined) messages.push({ role: 'completion', content: answer.text });
  return messages.map((m) =>
    h(
      'div',
      { class: `message ${m.role ?? ''}`, 'data-role': m.role ?? '' },
      h(
        'div',
        { class: 'role' },
        `${m.role ?? '?'}${m.tool_call_id ? ` (result of ${m.tool_call_id})` : ''}${m.name ? ` ${m.name}` : ''}`,
      ),
      text(m.content) ? h('pre', {}, text(m.content)) : null,
      (m.tool_calls ?? []).map((t) =>
        h(
          'div',
          { class: 'tool-call' },
          h('b', {}, `→ ${t.function?.name ?? 'tool'}`),
          ` ${t.function?.arguments ?? ''}`,
          t.id ? h('span', { class: 'muted' }, ` (${t.id})`) : null,
        ),
      ),
    ),
  );
}

function text(content: unknown): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content.map((part: { text?: string }) => part.text ?? JSON.stringify(part)).join('\n');
  return JSON.stringify(content);
}

function short(value: unknown): string {
  if (value === undefined) return '–';
  const s = typeof value === 'string' ? value : JSON.stringify(value);
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}
