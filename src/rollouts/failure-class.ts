import type { CallRecord } from '../store/trace-store.js';
import type { HarnessRun } from './executor.js';
import type { FailureClass, RolloutEvent } from './rollout.js';

export interface ClassifiedFailure {
  failureClass: FailureClass;
  reason: string;
  /** What the class was read from (a call, a span, the exit), stored with the rollout's status. */
  evidence: Record<string, unknown>;
}

/** Upstream trouble the policy did not cause: the rollout is retried as a new attempt. */
const INFRASTRUCTURE_CALL_ERRORS = new Set<CallRecord['errorClass']>([
  'upstream_unreachable',
  'upstream_timeout',
  'upstream_stream_cut',
  'upstream_bad_response',
  'gateway_error',
  'policy_unavailable',
  'gateway_lost',
]);

/** Refusals as instruction-tuned models phrase them; the user's own patterns replace these. */
export const DEFAULT_REFUSAL_PATTERNS = [
  String.raw`^\s*I(?:'m| am) sorry,? but I (?:can(?:'|no)t|won't|am unable)`,
  String.raw`^\s*I (?:can(?:'|no)t|won't) (?:help|assist) with`,
];

/** The refusal patterns (rollouts.refusalPatterns; DEFAULT_REFUSAL_PATTERNS when unset) as the runner matches them. */
export function refusalRegExps(patterns: readonly string[] = DEFAULT_REFUSAL_PATTERNS): RegExp[] {
  return patterns.map((p) => new RegExp(p, 'i'));
}

/**
 * Why a harness run failed, read from how it ended, its journaled calls and the spans it
 * reported. Returns null for a run that ended well. When the harness exits non-zero, the last
 * thing that went wrong before it did is taken as the cause: a denied permission or a failed
 * tool (spans), or a model reply the harness could not use: cut at max tokens or a refusal
 * (`model`), or an output it could not parse (`policy_output`: tool arguments that are not a JSON
 * object, a tool the request did not offer, a tool call left unparsed in the text), with the call
 * and what could not be parsed as evidence.
 */
export function classifyFailure(
  run: HarnessRun,
  calls: readonly CallRecord[],
  events: readonly RolloutEvent[],
  refusalPatterns: readonly RegExp[] = refusalRegExps(),
): ClassifiedFailure | null {
  const exit = {
    exitCode: run.exitCode,
    killedBy: run.killedBy,
    seconds: Number(run.seconds.toFixed(3)),
    logTail: run.logTail.slice(-1000),
    ...(run.logTruncatedBytes ? { logTruncatedBytes: run.logTruncatedBytes } : {}),
    ...run.where,
  };
  if (run.problem) return { ...run.problem, evidence: exit };
  const irreversible = events.find(
    (e) => e.type === 'span' && e.payload.irreversible === true && e.payload.failure !== undefined,
  );
  if (irreversible) {
    const { name, kind, failure } = irreversible.payload as { name?: string; kind?: string; failure?: string };
    return {
      failureClass: 'irreversible',
      reason: `irreversible ${kind ?? 'action'} "${name}" failed: ${failure}`,
      evidence: { ...exit, actionId: irreversible.actionId, span: name, kind, failure },
    };
  }
  if (run.timedOut)
    return {
      failureClass: 'timeout',
      reason: `the harness ran past its timeout (${run.seconds.toFixed(1)} s)`,
      evidence: exit,
    };
  if (run.exitCode === 0) return null;

  const how = run.exitCode === null ? `was killed by ${run.killedBy}` : `exited with ${run.exitCode}`;
  const log = run.logTail.trim().split('\n').slice(-3).join(' | ');
  // The gateway picks the backend's model name, so a backend 404 (it lost the version) is Rein's fault too.
  const broken = calls.find(
    (c) =>
      INFRASTRUCTURE_CALL_ERRORS.has(c.errorClass ?? null) ||
      (c.upstreamStatus ?? 0) >= 500 ||
      c.upstreamStatus === 404,
  );
  if (broken) {
    return {
      failureClass: 'infrastructure',
      reason: `the harness ${how} after model call ${broken.id} failed upstream (${broken.errorClass ?? broken.upstreamStatus}): ${log}`,
      evidence: {
        ...exit,
        callId: broken.id,
        errorClass: broken.errorClass,
        upstreamStatus: broken.upstreamStatus,
        errorMessage: broken.errorMessage,
      },
    };
  }
  const cause = [spanFailure(events), modelFailure(calls.at(-1), refusalPatterns)]
    .filter((c): c is ClassifiedFailure & { at: number } => c !== null)
    .sort((a, b) => b.at - a.at)[0];
  if (cause) {
    const { at: _at, ...failure } = cause;
    return {
      ...failure,
      reason: `the harness ${how} after ${failure.reason}`,
      evidence: { ...exit, ...failure.evidence },
    };
  }
  return (
    refusedCallFailure(calls.at(-1), how, log, exit) ?? {
      failureClass: 'harness',
      reason: `the harness ${how}: ${log || '(no output)'}`,
      evidence: exit,
    }
  );
}

/**
 * A crash after the backend refused the last call (a prompt over the context length, a bad parameter): the harness's
 * failure, in the backend's own words (the journal keeps them).
 */
function refusedCallFailure(
  refused: CallRecord | undefined,
  how: string,
  log: string,
  exit: Record<string, unknown>,
): ClassifiedFailure | null {
  if (refused?.errorClass !== 'upstream_http_error') return null;
  const said = refused.errorMessage ?? `the backend answered ${refused.upstreamStatus}`;
  return {
    failureClass: 'harness',
    reason: `the harness ${how} after model call ${refused.id} failed: ${said}; log: ${log || '(no output)'}`,
    evidence: {
      ...exit,
      callId: refused.id,
      upstreamStatus: refused.upstreamStatus,
      errorMessage: refused.errorMessage,
    },
  };
}

/** The last span the harness reported, when it failed or was denied. */
function spanFailure(events: readonly RolloutEvent[]): (ClassifiedFailure & { at: number }) | null {
  const span = events.filter((e) => e.type === 'span').at(-1);
  if (!span) return null;
  const { name, kind, permission, failure } = span.payload as {
    name?: string;
    kind?: string;
    permission?: string;
    failure?: string;
  };
  const evidence = { actionId: span.actionId, span: name, kind, permission, failure };
  const at = Date.parse(span.at);
  if (permission === 'denied')
    return { failureClass: 'permission', reason: `permission for ${kind} "${name}" was denied`, evidence, at };
  if (failure !== undefined)
    return { failureClass: 'tool', reason: `${kind} "${name}" failed: ${failure}`, evidence, at };
  return null;
}

/** The model's last reply, when the harness could not use it: cut short, not parsable, or a refusal. */
function modelFailure(
  call: CallRecord | undefined,
  refusalPatterns: readonly RegExp[],
): (ClassifiedFailure & { at: number }) | null {
  if (!call || call.status !== 'ok') return null;
  const at = call.startedAt + (call.latencyMs ?? 0);
  const evidence = (problem: string, detail?: unknown, toolCallId?: string) => ({
    callId: call.id,
    seq: call.seq,
    problem,
    ...(detail !== undefined && { detail }),
    ...(toolCallId !== undefined && { toolCallId }),
  });
  if (call.choices?.some((c) => c.finishReason === 'length')) {
    return {
      failureClass: 'model',
      reason: `model call ${call.id} stopped at max tokens`,
      evidence: evidence('max_tokens'),
      at,
    };
  }
  const offered = offeredTools(call.requestReceived);
  for (const reply of replies(call.response)) {
    const broken = unparsable(reply, offered);
    if (broken) {
      return {
        failureClass: 'policy_output',
        reason: `model call ${call.id} ${broken.what}`,
        evidence: evidence(broken.problem, broken.detail.slice(0, 300), broken.toolCallId),
        at,
      };
    }
    const refusal = reply.refusal ?? (refusalPatterns.some((p) => p.test(reply.text)) ? reply.text : null);
    if (refusal)
      return {
        failureClass: 'model',
        reason: `model call ${call.id} refused`,
        evidence: evidence('refusal', refusal.slice(0, 300)),
        at,
      };
  }
  return null;
}

/** Tool-call markup of common chat templates (Hermes/Qwen, Mistral, Llama) a server's parser leaves in the text. */
const TOOL_CALL_MARKUP = /<tool_call>|\[TOOL_CALLS\]|<\|python_tag\|>|<function=/;

/**
 * What in a reply a harness cannot parse: tool arguments that are not a JSON object, a tool the request did not
 * offer (when it listed its tools), or a tool call the server's parser left in the text.
 */
function unparsable(
  reply: Reply,
  offered: ReadonlySet<string> | null,
): { problem: string; what: string; detail: string; toolCallId?: string } | null {
  for (const call of reply.toolCalls) {
    const toolCallId = call.id ?? undefined;
    if (call.arguments !== null && !isJsonObject(call.arguments))
      return {
        problem: 'malformed_arguments',
        what: 'gave tool arguments that are not a JSON object',
        detail: call.arguments,
        ...(toolCallId && { toolCallId }),
      };
    if (offered && call.name !== null && !offered.has(call.name))
      return {
        problem: 'unknown_tool',
        what: `called a tool it was not offered: "${call.name.slice(0, 100)}"`,
        detail: call.name,
        ...(toolCallId && { toolCallId }),
      };
  }
  if (offered && reply.toolCalls.length === 0 && TOOL_CALL_MARKUP.test(reply.text))
    return { problem: 'unparsed_tool_call', what: 'wrote a tool call the server could not parse', detail: reply.text };
  return null;
}

/** The function tools a request offered, by name; null when it listed none (nothing to check a name against). */
function offeredTools(request: unknown): Set<string> | null {
  const tools = (request as { tools?: unknown } | null)?.tools;
  if (!Array.isArray(tools) || tools.length === 0) return null;
  const names = new Set<string>();
  for (const tool of tools as Array<{ name?: unknown; function?: { name?: unknown } }>) {
    const name = tool.function?.name ?? tool.name;
    // A tool without a name (a built-in, a custom type) may be called by any name: nothing to check.
    if (typeof name !== 'string') return null;
    names.add(name);
  }
  return names;
}

interface ToolCall {
  id: string | null;
  name: string | null;
  /** The arguments as the model wrote them (JSON text), null when absent. */
  arguments: string | null;
}

interface Reply {
  text: string;
  refusal: string | null;
  toolCalls: ToolCall[];
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** The replies of a chat completion, a completion or a response, in one shape. */
function replies(response: unknown): Reply[] {
  const body = (response ?? {}) as { choices?: unknown[]; output?: unknown[] };
  if (Array.isArray(body.choices)) {
    return body.choices.map((choice) => {
      const c = choice as {
        text?: unknown;
        message?: {
          content?: unknown;
          refusal?: unknown;
          tool_calls?: Array<{ id?: unknown; function?: { name?: unknown; arguments?: unknown } }>;
        };
      };
      const message = c.message;
      return {
        text: str(message?.content) ?? str(c.text) ?? '',
        refusal: typeof message?.refusal === 'string' && message.refusal !== '' ? message.refusal : null,
        toolCalls: (message?.tool_calls ?? []).map((t) => ({
          id: str(t.id),
          name: str(t.function?.name),
          arguments: str(t.function?.arguments),
        })),
      };
    });
  }
  if (Array.isArray(body.output)) {
    const items = body.output as Array<{
      type?: string;
      call_id?: unknown;
      name?: unknown;
      arguments?: unknown;
      content?: Array<{ type?: string; text?: unknown; refusal?: unknown }>;
    }>;
    const parts = items.flatMap((i) => (i.type === 'message' ? (i.content ?? []) : []));
    return [
      {
        text: parts.flatMap((p) => (p.type === 'output_text' && typeof p.text === 'string' ? [p.text] : [])).join(''),
        refusal:
          parts.flatMap((p) => (p.type === 'refusal' && typeof p.refusal === 'string' ? [p.refusal] : [])).join('') ||
          null,
        toolCalls: items
          .filter((i) => i.type === 'function_call')
          .map((i) => ({ id: str(i.call_id), name: str(i.name), arguments: str(i.arguments) })),
      },
    ];
  }
  return [];
}

function isJsonObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}
