import { canonicalJson } from '../../rollouts/harness-spec.js';
import type { Action, Step, ToolSpec } from '../contract.js';
import type { RulesSpec } from '../variant-spec.js';
import { cutIntoPages, type KeptPages, pageNumber, pageWithMarker } from './paging.js';

/**
 * The `rules` operator: a variant's rules wrapped around an environment's step, so its tools
 * behave differently (a tool gone, a stricter format, a rate limit, transient failures, paged
 * output) while the task, its contract and its verifier stay the same. Everything here is
 * deterministic in the sequence of calls: a session replayed from its journal gets the same
 * answers.
 *
 * Order when several rules are set, each one answering before the next is asked:
 *   1. removeTool: the removed tool is refused first; nothing else about it matters.
 *   2. a page request (`"page": n`, n ≥ 2, with paging set) is answered from the pages kept from
 *      that tool's last output: it reads what the service already sent, so no format check, no
 *      rate limit and no transient failure applies to it, and it does not count as a call.
 *   3. strictFormat: a malformed argument is refused before it "reaches the service", so it is not
 *      counted by the rate limit or by transient failures either.
 *   4. rateLimit: counts every call let through to here.
 *   5. transientErrors: counts the calls of its tools that passed the rate limit.
 *   6. the environment's own step (with the `page` argument taken out when paging is set).
 *   7. paging of the step's output.
 */

/** What a session remembers between calls for its rules: plain JSON, journaled with the session. */
export interface RuleState {
  /** rateLimit: calls let through since the last cooldown. */
  callsInBurst: number;
  /** rateLimit: calls still to refuse before the count starts over. */
  cooldownLeft: number;
  /** transientErrors: fresh calls of the counted tools so far (a retry of a failed call is not one). */
  countedCalls: number;
  /** transientErrors: the call (tool and arguments) that last failed; the next identical call succeeds. */
  failedCall: string | null;
  /** paging: each tool's last full output, cut into pages. */
  kept: KeptPages[];
}

export const newRuleState = (): RuleState => ({
  callsInBurst: 0,
  cooldownLeft: 0,
  countedCalls: 0,
  failedCall: null,
  kept: [],
});

/** One call's answer: the environment's step (null when a rule answered without calling it). */
export interface RuledStep<S> {
  observation: string;
  done: boolean;
  /** True when the observation is a refusal or an error the caller may react to (retry, fix, wait). */
  error: boolean;
  step: Step<S> | null;
}

/** A variant's rules checked against the environment's tools; each problem names the field and the fix. */
export function rulesProblems(rules: RulesSpec | undefined, tools: string[]): string[] {
  if (!rules) return [];
  const problems: string[] = [];
  const known = `the environment's tools are ${tools.map((t) => `"${t}"`).join(', ')}`;
  const mustBeTool = (field: string, tool: string) => {
    if (!tools.includes(tool)) problems.push(`rules.${field} "${tool}" is not a tool of the environment; ${known}`);
  };
  if (rules.strictFormat) {
    mustBeTool('strictFormat.tool', rules.strictFormat.tool);
    const compileError = patternError(rules.strictFormat.pattern);
    if (compileError)
      problems.push(`rules.strictFormat.pattern does not compile as a regular expression (${compileError}); fix it`);
  }
  if (rules.removeTool) {
    const { tool, alternative } = rules.removeTool;
    mustBeTool('removeTool.tool', tool);
    mustBeTool('removeTool.alternative', alternative);
    if (tool === alternative)
      problems.push(
        `rules.removeTool.alternative must differ from rules.removeTool.tool ("${tool}"): name a tool left`,
      );
    if (rules.strictFormat?.tool === tool)
      problems.push(`rules.strictFormat.tool "${tool}" is the removed tool, so it is never called: pick another tool`);
  }
  if (rules.transientErrors?.tools) {
    if (rules.transientErrors.tools.length === 0)
      problems.push('rules.transientErrors.tools is empty, so no call would fail: list tools or leave it out for all');
    for (const tool of rules.transientErrors.tools) mustBeTool('transientErrors.tools', tool);
  }
  return problems;
}

function patternError(pattern: string): string | null {
  try {
    new RegExp(pattern);
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

/** The tools a session offers under these rules (the removed tool left out). */
export function offeredTools(rules: RulesSpec | undefined, tools: ToolSpec[]): ToolSpec[] {
  const removed = rules?.removeTool?.tool;
  return removed === undefined ? tools : tools.filter((t) => t.function.name !== removed);
}

/**
 * One tool call under the rules (in the order above). `state` is this session's rule state and
 * is updated in place; `step` is the environment's step bound to the session's current state.
 */
export function stepWithRules<S>(
  rules: RulesSpec | undefined,
  state: RuleState,
  action: Action,
  step: (action: Action) => Step<S>,
): RuledStep<S> {
  if (!rules) return fromEnvironment(step(action));
  const removed = rules.removeTool;
  if (removed && action.tool === removed.tool)
    return refusal(`tool "${removed.tool}" is not available; use "${removed.alternative}" instead`);
  const paging = rules.paging && pagingArgument<S>(state, action);
  if (paging && 'answer' in paging) return paging.answer;
  const call = paging ? paging.call : action;
  const refused = formatRefusal(rules, call) ?? rateLimitRefusal(rules, state) ?? transientFailure(rules, state, call);
  if (refused) return refusal(refused);
  const stepped = step(call);
  return rules.paging ? firstPage(state, call.tool, stepped, rules.paging.pageSize) : fromEnvironment(stepped);
}

const fromEnvironment = <S>(step: Step<S>): RuledStep<S> => ({
  observation: step.observation,
  done: step.done,
  error: false,
  step,
});

const refusal = <S>(message: string): RuledStep<S> => ({
  observation: `error: ${message}`,
  done: false,
  error: true,
  step: null,
});

/** strictFormat: the argument, as text, must match the pattern whole. */
function formatRefusal(rules: RulesSpec, action: Action): string | null {
  const format = rules.strictFormat;
  if (!format || action.tool !== format.tool) return null;
  const value = action.arguments[format.argument];
  const text = value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value);
  return wholeMatch(format.pattern).test(text) ? null : `"${format.argument}" must be ${format.hint}`;
}

function wholeMatch(pattern: string): RegExp {
  const compileError = patternError(pattern);
  // rulesProblems reports this before a run; a caller that skipped it learns the same here.
  if (compileError) throw new Error(`rules.strictFormat.pattern does not compile (${compileError}); fix the variant`);
  return new RegExp(`^(?:${pattern})$`);
}

/** rateLimit: `calls` calls let through, then `cooldown` refused, then again. */
function rateLimitRefusal(rules: RulesSpec, state: RuleState): string | null {
  const limit = rules.rateLimit;
  if (!limit) return null;
  if (state.cooldownLeft > 0) {
    state.cooldownLeft -= 1;
    return 'rate limit exceeded; wait and try again';
  }
  state.callsInBurst += 1;
  if (state.callsInBurst >= limit.calls) {
    state.callsInBurst = 0;
    state.cooldownLeft = limit.cooldown;
  }
  return null;
}

/**
 * transientErrors: every `every`-th fresh call of the counted tools fails once. The retry of the
 * failed call (same tool, same arguments, whenever it comes) completes that call rather than
 * making a new one: it is not counted and it succeeds, so a call never fails twice.
 */
function transientFailure(rules: RulesSpec, state: RuleState, action: Action): string | null {
  const transient = rules.transientErrors;
  if (!transient || (transient.tools && !transient.tools.includes(action.tool))) return null;
  const call = canonicalJson([action.tool, action.arguments]);
  if (call === state.failedCall) {
    state.failedCall = null;
    return null;
  }
  state.countedCalls += 1;
  if (state.countedCalls % transient.every !== 0) return null;
  state.failedCall = call;
  return 'temporarily unavailable (transient); try the same call again';
}

/**
 * paging: a `page` argument is the rules', not the tool's. Page n ≥ 2 is answered from the pages
 * kept from the tool's last output; page 1 (or none) is a fresh call, passed on without `page`.
 */
function pagingArgument<S>(state: RuleState, action: Action): { answer: RuledStep<S> } | { call: Action } {
  if (!('page' in action.arguments)) return { call: action };
  const { page: asked, ...rest } = action.arguments;
  const kept = state.kept.find((k) => k.tool === action.tool);
  const total = kept?.pages.length ?? 1;
  const page = pageNumber(asked);
  if (page === null) return { answer: refusal(`"page" must be a whole number from 1 to ${total}`) };
  if (page === 1) return { call: { tool: action.tool, arguments: rest } };
  if (!kept)
    return { answer: refusal(`no earlier output of "${action.tool}" to page through; call it without "page" first`) };
  if (page > total)
    return { answer: refusal(`there is no page ${page}: the last output of "${action.tool}" has pages 1 to ${total}`) };
  return { answer: { observation: pageWithMarker(kept, page), done: kept.done, error: false, step: null } };
}

/** paging: the step's output cut into pages and kept; the caller reads page 1. */
function firstPage<S>(state: RuleState, tool: string, step: Step<S>, pageSize: number): RuledStep<S> {
  const kept: KeptPages = { tool, pages: cutIntoPages(step.observation, pageSize), done: step.done };
  state.kept = [...state.kept.filter((k) => k.tool !== tool), kept];
  return { observation: pageWithMarker(kept, 1), done: step.done, error: false, step };
}
