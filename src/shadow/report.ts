import { translationOf } from '../apis/registry.js';
import { formatTable } from '../text-table.js';
import { recordedRewards } from '../rollouts/rewards.js';
import type { CallEndpoint, CallRecord, ShadowCallRecord, TraceStore } from '../store/trace-store.js';

/**
 * The shadow report: what a candidate policy would have done on the production calls mirrored
 * to it (gateway mirror mode), against what the incumbent did and how its rollouts turned out.
 * The candidate failing to answer at all (execution failures) is counted apart from it answering
 * differently (disagreement), and disagreement is split by the rollout's outcome: differing where
 * the incumbent was rewarded is a risk, differing where it failed is where the candidate may help.
 */

type Json = Record<string, unknown>;

/** What a response does: the tool calls of its first choice, or else its final answer. */
export type Action =
  { kind: 'tools'; calls: Array<{ name: string; arguments: string }> } | { kind: 'answer'; text: string };

export const DISAGREEMENT_KINDS = [
  'different_tool',
  'different_arguments',
  'different_answer',
  'tool_vs_answer',
] as const;
export type DisagreementKind = (typeof DISAGREEMENT_KINDS)[number];
export type Agreement = 'same' | DisagreementKind;

/**
 * The rollout's outcome as the incumbent played it: rewarded (verifier reward > 0), unrewarded
 * (reward ≤ 0, or failed unscored), or unscored (still running, cancelled, or finished without a
 * verifier reward).
 */
export const OUTCOMES = ['rewarded', 'unrewarded', 'unscored'] as const;
export type RolloutOutcome = (typeof OUTCOMES)[number];

export interface ShadowExample {
  shadowCallId: string;
  primaryCallId: string;
  rolloutId: string;
  outcome: RolloutOutcome;
  incumbent: string;
  candidate: string;
}

export interface OutcomeSplit {
  /** Rollouts with at least one mirrored call. */
  rollouts: number;
  compared: number;
  disagreed: number;
  /** disagreed / compared; null when nothing was compared. */
  disagreementRate: number | null;
  kinds: Record<DisagreementKind, number>;
}

export interface ShadowReport {
  candidate: string;
  /** The versions that answered the mirrored calls in production. */
  incumbents: string[];
  rollouts: number;
  /** Shadow calls journaled for the candidate. */
  mirrored: number;
  /**
   * The candidate gave no answer: errors by class (`unreadable_response` when its answer had no
   * choice to read), with example shadow call ids; not counted as disagreement.
   */
  executionFailures: { total: number; byClass: Record<string, number>; examples: Record<string, string[]> };
  /** Shadow calls the candidate answered. */
  completed: number;
  /** Completed, but the incumbent's call has no answer to compare with (it failed, or is unfinished). */
  incomparable: number;
  compared: number;
  actions: Record<Agreement, number>;
  disagreementRate: number | null;
  byOutcome: Record<RolloutOutcome, OutcomeSplit>;
  /** Up to `examplesPerKind` of each kind of disagreement, oldest first. */
  examples: Record<DisagreementKind, ShadowExample[]>;
}

/** One mirrored call, reduced to what the report counts. */
export interface ShadowObservation {
  shadow: Pick<ShadowCallRecord, 'id' | 'primaryCallId' | 'rolloutId' | 'incumbentVersion' | 'status' | 'errorClass'>;
  outcome: RolloutOutcome;
  /** The incumbent's action; undefined when its call gave no response. */
  incumbent: Action | undefined;
  /** The candidate's action; undefined when the shadow call failed. */
  candidate: Action | undefined;
}

const PAGE = 200;

export async function shadowReport(
  store: TraceStore,
  options: { candidate: string; rolloutIds?: string[]; examplesPerKind?: number },
): Promise<ShadowReport> {
  const observations: ShadowObservation[] = [];
  const outcomes = new Map<string, RolloutOutcome>();
  const observe = async (page: ShadowCallRecord[]) => {
    // Shadow calls are read a page at a time and reduced to their actions, so a long run's
    // requests are never all in memory; each rollout's calls are decoded once per page.
    const byRollout = new Map<string, ShadowCallRecord[]>();
    for (const shadow of page) {
      const group = byRollout.get(shadow.rolloutId);
      if (group) group.push(shadow);
      else byRollout.set(shadow.rolloutId, [shadow]);
    }
    for (const [rolloutId, shadows] of byRollout) {
      let outcome = outcomes.get(rolloutId);
      if (!outcome) {
        outcome = rolloutOutcome((await store.getRollout(rolloutId))?.status, await store.listEvents(rolloutId));
        outcomes.set(rolloutId, outcome);
      }
      const primaries = new Map<string, CallRecord>((await store.listCalls(rolloutId)).map((call) => [call.id, call]));
      for (const shadow of shadows) {
        const primary = primaries.get(shadow.primaryCallId);
        const { id, primaryCallId, incumbentVersion, status, errorClass } = shadow;
        observations.push({
          // Not the whole record: its request would keep every page in memory.
          shadow: { id, primaryCallId, rolloutId, incumbentVersion, status, errorClass },
          outcome,
          incumbent: primary && primary.status === 'ok' ? actionOf(primary.endpoint, primary.response) : undefined,
          candidate: shadow.status === 'ok' ? actionOf(shadow.endpoint, shadow.response) : undefined,
        });
      }
    }
  };
  for (const rolloutId of options.rolloutIds ?? [undefined]) {
    let after: string | undefined;
    for (;;) {
      const page = await store.listShadowCalls({
        candidate: options.candidate,
        ...(rolloutId !== undefined && { rolloutId }),
        limit: PAGE,
        ...(after !== undefined && { after }),
      });
      await observe(page);
      if (page.length < PAGE) break;
      after = page.at(-1)?.id;
    }
  }
  return aggregateShadowCalls(options.candidate, observations, options.examplesPerKind ?? 5);
}

export function aggregateShadowCalls(
  candidate: string,
  observations: readonly ShadowObservation[],
  examplesPerKind = 5,
): ShadowReport {
  const kinds = () => Object.fromEntries(DISAGREEMENT_KINDS.map((k) => [k, 0])) as Record<DisagreementKind, number>;
  const report: ShadowReport = {
    candidate,
    incumbents: [...new Set(observations.map((o) => o.shadow.incumbentVersion))].sort(),
    rollouts: new Set(observations.map((o) => o.shadow.rolloutId)).size,
    mirrored: observations.length,
    executionFailures: { total: 0, byClass: {}, examples: {} },
    completed: 0,
    incomparable: 0,
    compared: 0,
    actions: { same: 0, ...kinds() },
    disagreementRate: null,
    byOutcome: Object.fromEntries(
      OUTCOMES.map((outcome) => [
        outcome,
        { rollouts: 0, compared: 0, disagreed: 0, disagreementRate: null, kinds: kinds() },
      ]),
    ) as Record<RolloutOutcome, OutcomeSplit>,
    examples: Object.fromEntries(DISAGREEMENT_KINDS.map((k) => [k, []])) as unknown as Record<
      DisagreementKind,
      ShadowExample[]
    >,
  };
  const rolloutsByOutcome = new Map<RolloutOutcome, Set<string>>(OUTCOMES.map((o) => [o, new Set()]));
  for (const { shadow, outcome, incumbent, candidate: proposed } of observations) {
    rolloutsByOutcome.get(outcome)?.add(shadow.rolloutId);
    if (shadow.status === 'error' || !proposed) {
      const errorClass = shadow.errorClass ?? 'unreadable_response';
      const failures = report.executionFailures;
      failures.total++;
      failures.byClass[errorClass] = (failures.byClass[errorClass] ?? 0) + 1;
      const examples = (failures.examples[errorClass] ??= []);
      if (examples.length < examplesPerKind) examples.push(shadow.id);
      continue;
    }
    report.completed++;
    if (!incumbent) {
      report.incomparable++;
      continue;
    }
    report.compared++;
    const split = report.byOutcome[outcome];
    split.compared++;
    const agreement = compareActions(incumbent, proposed);
    report.actions[agreement]++;
    if (agreement === 'same') continue;
    split.disagreed++;
    split.kinds[agreement]++;
    const examples = report.examples[agreement];
    if (examples.length < examplesPerKind) {
      examples.push({
        shadowCallId: shadow.id,
        primaryCallId: shadow.primaryCallId,
        rolloutId: shadow.rolloutId,
        outcome,
        incumbent: describeAction(incumbent),
        candidate: describeAction(proposed),
      });
    }
  }
  for (const outcome of OUTCOMES) {
    const split = report.byOutcome[outcome];
    split.rollouts = rolloutsByOutcome.get(outcome)?.size ?? 0;
    split.disagreementRate = split.compared ? split.disagreed / split.compared : null;
  }
  report.disagreementRate = report.compared ? (report.compared - report.actions.same) / report.compared : null;
  return report;
}

/** The rollout's outcome from its status and the verifier's reward (of its final attempt: see recordedRewards). */
export function rolloutOutcome(
  status: string | undefined,
  events: Parameters<typeof recordedRewards>[0],
): RolloutOutcome {
  const { verified } = recordedRewards(events);
  if (verified !== undefined) return verified > 0 ? 'rewarded' : 'unrewarded';
  return status === 'failed' ? 'unrewarded' : 'unscored';
}

/** The action of a journaled response; undefined when it has none to read (no choice, no output). */
export function actionOf(endpoint: CallEndpoint, response: unknown): Action | undefined {
  if (!isObject(response)) return undefined;
  // The Responses and Messages APIs' answers read as the chat message they translate.
  const translation = translationOf(endpoint);
  if (translation) {
    const answered = Array.isArray(endpoint === 'messages' ? response.content : response.output);
    return answered ? messageAction(translation.assistantMessageOf(response) as unknown as Json) : undefined;
  }
  const choices = Array.isArray(response.choices) ? response.choices.filter(isObject) : [];
  const first = choices.find((c) => c.index === 0) ?? choices[0];
  if (!first) return undefined;
  if (endpoint === 'completions')
    return { kind: 'answer', text: typeof first.text === 'string' ? first.text.trim() : '' };
  return isObject(first.message) ? messageAction(first.message) : undefined;
}

/** A chat assistant message's action: its tool calls, else its text. */
function messageAction(message: Json): Action {
  const toolCalls = Array.isArray(message.tool_calls) ? message.tool_calls.filter(isObject) : [];
  if (toolCalls.length) {
    return {
      kind: 'tools',
      calls: toolCalls.map((c) =>
        isObject(c.function) ? toolCall(c.function.name, c.function.arguments) : toolCall(undefined, undefined),
      ),
    };
  }
  return { kind: 'answer', text: contentText(message.content).trim() };
}

export function compareActions(incumbent: Action, candidate: Action): Agreement {
  if (incumbent.kind === 'answer' && candidate.kind === 'answer')
    return incumbent.text === candidate.text ? 'same' : 'different_answer';
  if (incumbent.kind === 'tools' && candidate.kind === 'tools') {
    const names = (action: typeof incumbent) => action.calls.map((c) => c.name).join('\n');
    if (names(incumbent) !== names(candidate)) return 'different_tool';
    return incumbent.calls.every((call, i) => call.arguments === candidate.calls[i]?.arguments)
      ? 'same'
      : 'different_arguments';
  }
  return 'tool_vs_answer';
}

/** JSON with object keys sorted, so arguments that differ only in key order compare equal. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isObject(value)) {
    const entries = Object.keys(value)
      .sort()
      .filter((key) => value[key] !== undefined)
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function describeAction(action: Action, maxLength = 160): string {
  const text =
    action.kind === 'tools'
      ? action.calls.map((c) => `${c.name}(${c.arguments})`).join(' + ')
      : `answer ${JSON.stringify(action.text)}`;
  return text.length > maxLength ? `${text.slice(0, maxLength - 1)}…` : text;
}

const KIND_LABELS: Record<Agreement, string> = {
  same: 'same action',
  different_tool: 'different tool',
  different_arguments: 'different arguments',
  different_answer: 'different final answer',
  tool_vs_answer: 'tool call vs answer',
};

const OUTCOME_LABELS: Record<RolloutOutcome, string> = {
  rewarded: 'rewarded (reward > 0)',
  unrewarded: 'unrewarded or failed',
  unscored: 'not scored',
};

/** The report as the CLI prints it. */
export function formatShadowReport(report: ShadowReport): string {
  const percent = (part: number, whole: number) => (whole ? `${((100 * part) / whole).toFixed(1)}%` : '-');
  const lines = [
    `shadow report: candidate ${report.candidate} vs ${report.incumbents.join(', ') || '(no incumbent)'}`,
    `${report.mirrored} mirrored calls over ${report.rollouts} rollouts`,
  ];
  if (report.mirrored === 0) return `${lines.join('\n')}\n`;
  const failures = report.executionFailures;
  const classes = Object.entries(failures.byClass)
    .sort(([, a], [, b]) => b - a)
    .map(([errorClass, n]) => `${errorClass} ${n}`);
  lines.push(
    '',
    `execution failures (the candidate gave no answer; not disagreement): ${failures.total} (${percent(failures.total, report.mirrored)})${classes.length ? `: ${classes.join(', ')}` : ''}`,
  );
  for (const [errorClass, ids] of Object.entries(failures.examples))
    lines.push(`  ${errorClass}, e.g. ${ids.join(', ')}`);
  lines.push(
    '',
    `answered: ${report.completed}; compared with the incumbent: ${report.compared}` +
      (report.incomparable ? ` (${report.incomparable} without an incumbent answer)` : ''),
  );
  if (report.compared) {
    const agreements: Agreement[] = ['same', ...DISAGREEMENT_KINDS];
    lines.push(
      formatTable(
        ['action', 'calls', 'share'],
        agreements.map((a) => [KIND_LABELS[a], String(report.actions[a]), percent(report.actions[a], report.compared)]),
      ),
    );
    lines.push(
      '',
      'disagreement by how the incumbent did on the rollout:',
      formatTable(
        ['outcome', 'rollouts', 'compared', 'disagreed', 'rate', ...DISAGREEMENT_KINDS.map((k) => KIND_LABELS[k])],
        OUTCOMES.map((outcome) => {
          const split = report.byOutcome[outcome];
          return [
            OUTCOME_LABELS[outcome],
            String(split.rollouts),
            String(split.compared),
            String(split.disagreed),
            percent(split.disagreed, split.compared),
            ...DISAGREEMENT_KINDS.map((k) => String(split.kinds[k])),
          ];
        }),
      ),
    );
  }
  const examples = DISAGREEMENT_KINDS.flatMap((kind) =>
    report.examples[kind].map(
      (e) =>
        `  ${KIND_LABELS[kind]}: ${e.shadowCallId} (call ${e.primaryCallId}, rollout ${e.rolloutId}, ${e.outcome}): ${e.incumbent} → ${e.candidate}`,
    ),
  );
  if (examples.length) lines.push('', 'examples (incumbent → candidate):', ...examples);
  return `${lines.join('\n')}\n`;
}

function toolCall(name: unknown, args: unknown): { name: string; arguments: string } {
  return { name: typeof name === 'string' ? name : '', arguments: canonicalArguments(args) };
}

/** Arguments as canonical JSON; text that is not JSON is compared as it is, trimmed. */
function canonicalArguments(args: unknown): string {
  if (typeof args !== 'string') return canonicalJson(args ?? {});
  try {
    return canonicalJson(JSON.parse(args));
  } catch {
    return args.trim();
  }
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter(isObject)
    .map((part) => (typeof part.text === 'string' ? part.text : ''))
    .join('');
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
