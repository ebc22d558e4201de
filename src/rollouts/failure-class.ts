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

/**
 * Why a harness run failed, read from how it ended, its journaled calls and the spans it
 * reported. Returns null for a run that ended well. When the harness exits non-zero, the last
 * thing that went wrong before it did is taken as the cause: a denied permission or a failed
 * tool (spans), or a model reply the harness could not use (cut at max tokens, malformed tool
 * arguments, a refusal).
 */
export function classifyFailure(
  run: HarnessRun,
  calls: readonly CallRecord[],
  events: readonly RolloutEvent[],
  refusalPatterns: readonly RegExp[] = DEFAULT_REFUSAL_PATTERNS.map((p) => new RegExp(p, 'i')),
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
  return { failureClass: 'harness', reason: `the harness ${how}: ${log || '(no output)'}`, evidence: exit };
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

/** The model's last reply, when the harness could not use it. */
function modelFailure(
  call: CallRecord | undefined,
  refusalPatterns: readonly RegExp[],
): (ClassifiedFailure & { at: number }) | null {
  if (!call || call.status !== 'ok') return null;
  const at = call.startedAt + (call.latencyMs ?? 0);
  const evidence = (problem: string, detail?: unknown) => ({
    callId: call.id,
    seq: call.seq,
    problem,
    ...(detail !== undefined && { detail }),
  });
  if (call.choices?.some((c) => c.finishReason === 'length')) {
    return {
      failureClass: 'model',
      reason: `model call ${call.id} stopped at max tokens`,
      evidence: evidence('max_tokens'),
      at,
    };
  }
  for (const reply of replies(call.response)) {
    const malformed = reply.toolArguments.find((args) => !isJson(args));
    if (malformed !== undefined) {
      return {
        failureClass: 'model',
        reason: `model call ${call.id} gave tool arguments that are not JSON`,
        evidence: evidence('malformed_output', malformed.slice(0, 300)),
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

interface Reply {
  text: string;
  refusal: string | null;
  toolArguments: string[];
}

/** The replies of a chat completion, a completion or a response, in one shape. */
function replies(response: unknown): Reply[] {
  const body = (response ?? {}) as { choices?: unknown[]; output?: unknown[] };
  if (Array.isArray(body.choices)) {
    return body.choices.map((choice) => {
      const c = choice as {
        text?: unknown;
        message?: { content?: unknown; refusal?: unknown; tool_calls?: Array<{ function?: { arguments?: unknown } }> };
      };
      const message = c.message;
      return {
        text: typeof message?.content === 'string' ? message.content : typeof c.text === 'string' ? c.text : '',
        refusal: typeof message?.refusal === 'string' && message.refusal !== '' ? message.refusal : null,
        toolArguments: (message?.tool_calls ?? []).flatMap((t) =>
          typeof t.function?.arguments === 'string' ? [t.function.arguments] : [],
        ),
      };
    });
  }
  if (Array.isArray(body.output)) {
    const items = body.output as Array<{
      type?: string;
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
        toolArguments: items.flatMap((i) =>
          i.type === 'function_call' && typeof i.arguments === 'string' ? [i.arguments] : [],
        ),
      },
    ];
  }
  return [];
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
