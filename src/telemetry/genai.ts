import type { Attributes } from '@opentelemetry/api';
import type { CallEndpoint, CallFinish } from '../store/trace-store.js';
import { textOfPart } from '../tokenizer/content-parts.js';

/**
 * A model call's span attributes under the OpenTelemetry GenAI semantic conventions (as of
 * @opentelemetry/semantic-conventions 1.45, whose GenAI names are "incubating": they are written
 * out here rather than imported from its large incubating entry). Backends that read them
 * (Jaeger, Phoenix, Langfuse, Grafana) show model, usage and finish reasons without any mapping.
 */

type Json = Record<string, unknown>;

const OPERATION: Record<CallEndpoint, string> = {
  'chat.completions': 'chat',
  completions: 'text_completion',
  responses: 'chat',
  messages: 'chat',
};

/** The span name the conventions ask for: `{operation} {model}`. */
export function callSpanName(endpoint: CallEndpoint, requestedModel: unknown): string {
  return typeof requestedModel === 'string' && requestedModel
    ? `${OPERATION[endpoint]} ${requestedModel}`
    : OPERATION[endpoint];
}

/** What is known when the call arrives: the operation, the model asked for and the sampling parameters. */
export function requestAttributes(endpoint: CallEndpoint, body: Json): Attributes {
  const stop = typeof body.stop === 'string' ? [body.stop] : stringArray(body.stop);
  return compact({
    'gen_ai.operation.name': OPERATION[endpoint],
    // Every backend Rein fronts speaks the OpenAI API; `gen_ai.system` is the deprecated name (1.45), kept for backends
    // that still read it.
    'gen_ai.provider.name': 'openai',
    'gen_ai.system': 'openai',
    'gen_ai.request.model': str(body.model),
    'gen_ai.request.temperature': num(body.temperature),
    'gen_ai.request.top_p': num(body.top_p),
    'gen_ai.request.top_k': num(body.top_k),
    'gen_ai.request.max_tokens': num(body.max_tokens) ?? num(body.max_completion_tokens) ?? num(body.max_output_tokens),
    'gen_ai.request.frequency_penalty': num(body.frequency_penalty),
    'gen_ai.request.presence_penalty': num(body.presence_penalty),
    'gen_ai.request.seed': num(body.seed),
    'gen_ai.request.stop_sequences': stop,
    'gen_ai.request.choice.count': num(body.n) !== undefined && body.n !== 1 ? num(body.n) : undefined,
    'gen_ai.request.stream': body.stream === true,
  });
}

/** What the call's outcome adds: the model that answered, usage, finish reasons. */
export function responseAttributes(
  endpoint: CallEndpoint,
  result: Pick<CallFinish, 'response' | 'usage' | 'choices'>,
): Attributes {
  const response = isObject(result.response) ? result.response : {};
  const usage = isObject(result.usage) ? result.usage : {};
  const finishReasons =
    endpoint === 'responses'
      ? [str(response.status)].filter((r): r is string => r !== undefined)
      : result.choices.map((c) => c.finishReason).filter((r): r is string => r !== null);
  return compact({
    'gen_ai.response.id': str(response.id),
    'gen_ai.response.model': str(response.model),
    'gen_ai.response.finish_reasons': finishReasons.length ? finishReasons : undefined,
    'gen_ai.usage.input_tokens': num(usage.prompt_tokens) ?? num(usage.input_tokens),
    'gen_ai.usage.output_tokens': num(usage.completion_tokens) ?? num(usage.output_tokens),
    'gen_ai.usage.cache_read.input_tokens':
      num(nested(usage, 'prompt_tokens_details', 'cached_tokens')) ??
      num(nested(usage, 'input_tokens_details', 'cached_tokens')),
    'gen_ai.usage.reasoning.output_tokens':
      num(nested(usage, 'completion_tokens_details', 'reasoning_tokens')) ??
      num(nested(usage, 'output_tokens_details', 'reasoning_tokens')),
  });
}

/**
 * The conversation as `gen_ai.input.messages` (JSON, the conventions' role-and-parts shape) from
 * the request as journaled (already redacted).
 */
export function inputMessages(endpoint: CallEndpoint, body: Json): string | undefined {
  if (endpoint === 'chat.completions' && Array.isArray(body.messages))
    return JSON.stringify(body.messages.map(chatMessage));
  if (endpoint === 'completions' && body.prompt !== undefined)
    return JSON.stringify([{ role: 'user', parts: [textPart(body.prompt)] }]);
  // The Responses API's input items have no agreed mapping yet: kept as sent.
  if (endpoint === 'responses' && body.input !== undefined)
    return JSON.stringify(
      typeof body.input === 'string' ? [{ role: 'user', parts: [textPart(body.input)] }] : body.input,
    );
  if (endpoint === 'messages' && Array.isArray(body.messages)) return JSON.stringify(body.messages);
  return undefined;
}

/** The reply as `gen_ai.output.messages` (JSON), from the response as journaled (already redacted). */
export function outputMessages(endpoint: CallEndpoint, response: unknown): string | undefined {
  if (!isObject(response)) return undefined;
  if (endpoint === 'responses') return response.output === undefined ? undefined : JSON.stringify(response.output);
  if (endpoint === 'messages') return response.content === undefined ? undefined : JSON.stringify(response.content);
  if (!Array.isArray(response.choices)) return undefined;
  return JSON.stringify(
    response.choices.map((choice: unknown) => {
      const c = isObject(choice) ? choice : {};
      const message =
        endpoint === 'chat.completions' && isObject(c.message)
          ? chatMessage(c.message)
          : { role: 'assistant', parts: [textPart(c.text)] };
      return { ...message, finish_reason: c.finish_reason ?? null };
    }),
  );
}

function chatMessage(message: unknown): { role: string; parts: Json[] } {
  const m = isObject(message) ? message : {};
  const parts: Json[] = [];
  if (m.role === 'tool')
    parts.push({ type: 'tool_call_response', id: m.tool_call_id ?? null, response: m.content ?? null });
  else if (m.content !== undefined && m.content !== null) parts.push(...contentParts(m.content));
  for (const call of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
    const fn = isObject(call) && isObject(call.function) ? call.function : {};
    parts.push({
      type: 'tool_call',
      id: isObject(call) ? (call.id ?? null) : null,
      name: fn.name ?? null,
      arguments: parseOrKeep(fn.arguments),
    });
  }
  return { role: str(m.role) ?? 'user', parts };
}

/**
 * A message's content as parts: a content-part array one part each, media by type only (their data,
 * often inline base64, stays out of the trace).
 */
function contentParts(content: unknown): Json[] {
  if (!Array.isArray(content)) return [textPart(content)];
  return content.map((part) => {
    const text = textOfPart(part);
    if (text !== undefined) return { type: 'text', content: text };
    return { type: isObject(part) && typeof part.type === 'string' ? part.type : 'unknown' };
  });
}

function textPart(content: unknown): Json {
  return { type: 'text', content: typeof content === 'string' ? content : JSON.stringify(content) };
}

function parseOrKeep(value: unknown): unknown {
  if (typeof value !== 'string') return value ?? null;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

function nested(value: Json, key: string, inner: string): unknown {
  const child = value[key];
  return isObject(child) ? child[inner] : undefined;
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function stringArray(value: unknown): string[] | undefined {
  return Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'string')
    ? (value as string[])
    : undefined;
}

function compact(attributes: Record<string, Attributes[string]>): Attributes {
  return Object.fromEntries(Object.entries(attributes).filter(([, v]) => v !== undefined));
}
