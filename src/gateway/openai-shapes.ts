import type { CallEndpoint, ChoiceTokens } from '../store/trace-store.js';
import { addition, applyEdits, elementsOf, membersOf, removals, skipSpace, StructuralScan, type Edit } from './json-text.js';
import type { BackendSpec } from './routing.js';

/**
 * The OpenAI / vLLM wire shapes the gateway touches: what it adds to a request, what it takes
 * back out of the response before the harness sees it, and where token ids and log-probs live
 * (vLLM ≥ 0.10.2: chat puts prompt ids at the top level, completions on each choice; streams put
 * prompt ids on the first chunk and each chunk's completion ids on its choices).
 */
type Json = Record<string, unknown>;

/** What the gateway added to a request, so it can be removed from the response again. */
export interface Injected {
  tokenIds: boolean;
  logprobs: boolean;
}

export const NOTHING_INJECTED: Injected = { tokenIds: false, logprobs: false };

/**
 * The request for the backend: the harness's own bytes with only the gateway's additions made
 * (the served model's name, and token ids and log-probs where the harness did not ask for them).
 * What the harness sent itself, even of a wrong type, reaches the backend untouched, so the
 * backend decides about it as it would without the gateway. `sent` is the same request parsed,
 * for the journal. `unstreamed` asks for one whole body whatever the harness asked (shadow calls).
 */
export function upstreamRequest(
  endpoint: CallEndpoint,
  body: Json,
  text: string,
  model: string,
  backend: BackendSpec,
  unstreamed = false,
): { sent: Json; sentText: string; injected: Injected } {
  const object = membersOf(text, skipSpace(text, 0));
  const edits: Edit[] = [];
  const sent: Json = { ...body };
  const set = (key: string, value: unknown) => {
    Object.defineProperty(sent, key, { value, enumerable: true, writable: true, configurable: true });
    const json = JSON.stringify(value);
    const present = object.members.filter((m) => m.key === key);
    if (present.length === 0) edits.push(addition(object, key, json));
    for (const member of present) edits.push({ start: member.valueStart, end: member.valueEnd, text: json });
  };
  set('model', model);
  if (unstreamed) set('stream', false);
  const injected: Injected = { tokenIds: false, logprobs: false };
  if (endpoint === 'responses') return { sent, sentText: withoutStreamOptions(applyEdits(text, edits)), injected };
  // Off, said any way the backend reads as off; anything else is the harness's to have refused or granted.
  const off = (key: string, ...offValues: unknown[]) => !Object.hasOwn(body, key) || offValues.includes(body[key]);
  if (backend.tokenIds && off('return_token_ids', false, null)) {
    set('return_token_ids', true);
    injected.tokenIds = true;
  }
  const chat = endpoint === 'chat.completions';
  // top_logprobs without logprobs is the backend's to refuse: asking for log-probs would make it valid.
  const topLogprobs = body.top_logprobs !== undefined && body.top_logprobs !== null;
  if (backend.logprobs && !topLogprobs && (chat ? off('logprobs', false, null) : off('logprobs', null))) {
    set('logprobs', chat ? true : 0);
    injected.logprobs = true;
  }
  return { sent, sentText: withoutStreamOptions(applyEdits(text, edits)), injected };

  // Stream options belong to a stream (vLLM refuses them without one). Removed on the edited text,
  // so the removal never meets an addition at the same place.
  function withoutStreamOptions(edited: string): string {
    if (!unstreamed || !Object.hasOwn(body, 'stream_options')) return edited;
    delete sent.stream_options;
    return applyEdits(edited, removals(membersOf(edited, skipSpace(edited, 0)).members, (m) => m.key === 'stream_options'));
  }
}

export function anythingInjected(injected: Injected): boolean {
  return injected.tokenIds || injected.logprobs;
}

/**
 * Removes what the gateway injected from a parsed response or stream chunk, in place (for the
 * journal, which keeps what the harness got). Adds nothing the backend did not send.
 */
export function stripInjected(message: Json, injected: Injected): void {
  const choices = Array.isArray(message.choices) ? (message.choices as unknown[]) : [];
  if (injected.tokenIds) delete message.prompt_token_ids;
  for (const choice of choices) {
    if (choice === null || typeof choice !== 'object') continue;
    const c = choice as Json;
    if (injected.tokenIds) {
      delete c.token_ids;
      delete c.prompt_token_ids;
    }
    if (injected.logprobs && Object.hasOwn(c, 'logprobs')) c.logprobs = null;
  }
}

/**
 * The same removal on the response's text, byte for byte otherwise: the harness gets the
 * backend's numbers and key order exactly as the backend wrote them.
 */
export function stripInjectedText(text: string, injected: Injected): string {
  if (!anythingInjected(injected)) return text;
  const scan = new StructuralScan(text);
  const edits: Edit[] = [];
  const editChoice = (start: number): number | undefined => {
    if (text[start] !== '{') return undefined;
    const choice = membersOf(text, start, scan);
    if (injected.tokenIds) edits.push(...removals(choice.members, (m) => m.key === 'token_ids' || m.key === 'prompt_token_ids'));
    for (const field of choice.members) {
      if (injected.logprobs && field.key === 'logprobs') edits.push({ start: field.valueStart, end: field.valueEnd, text: 'null' });
    }
    return choice.end;
  };
  // The choices are edited as the top level is walked: one pass over the text.
  const object = membersOf(text, skipSpace(text, 0), scan, (key, valueStart) => {
    if (key !== 'choices' || text[valueStart] !== '[') return undefined;
    const last = elementsOf(text, valueStart, scan, editChoice).at(-1);
    return skipSpace(text, last ? last.end : valueStart + 1) + 1;
  });
  if (injected.tokenIds) edits.push(...removals(object.members, (m) => m.key === 'prompt_token_ids'));
  return applyEdits(text, edits);
}

/**
 * What is wrong with a response (or stream chunk) the gateway is about to read tokens from, or
 * null: the journal stores ids and log-probs as the backend gave them, never coerced, so a value
 * that is not one is the backend's fault (`upstream_bad_response`), not data.
 */
export function responseProblem(endpoint: CallEndpoint, message: Json, chunk = false): string | null {
  if (endpoint === 'responses') return null;
  const problems: string[] = [];
  const ids = (value: unknown, where: string) => {
    if (value === undefined || value === null) return;
    if (!Array.isArray(value)) problems.push(`${where} is not an array`);
    else if (!value.every(isTokenId)) problems.push(`${where} holds a value that is not a token id (an integer in [0, 2^32))`);
  };
  ids(message.prompt_token_ids, 'prompt_token_ids');
  if (!Array.isArray(message.choices)) {
    if (!(chunk && message.choices === undefined)) problems.push('choices is not an array');
    return problems[0] ?? null;
  }
  (message.choices as unknown[]).forEach((choice, i) => {
    if (choice === null || typeof choice !== 'object' || Array.isArray(choice)) {
      problems.push(`choices[${i}] is not an object`);
      return;
    }
    const c = choice as Json;
    if (c.index !== undefined && !(Number.isSafeInteger(c.index) && (c.index as number) >= 0)) problems.push(`choices[${i}].index is not a non-negative integer`);
    if (chunk && c.delta !== undefined && c.delta !== null) {
      const delta = c.delta as Json;
      if (typeof delta !== 'object' || Array.isArray(delta)) problems.push(`choices[${i}].delta is not an object`);
      else if (delta.tool_calls !== undefined && delta.tool_calls !== null && !(Array.isArray(delta.tool_calls) && delta.tool_calls.every(isObject))) {
        problems.push(`choices[${i}].delta.tool_calls is not an array of objects`);
      }
    }
    ids(c.token_ids, `choices[${i}].token_ids`);
    ids(c.prompt_token_ids, `choices[${i}].prompt_token_ids`);
    const logprobs = c.logprobs;
    if (logprobs === undefined || logprobs === null) return;
    if (typeof logprobs !== 'object' || Array.isArray(logprobs)) {
      problems.push(`choices[${i}].logprobs is not an object`);
      return;
    }
    const { content, token_logprobs: tokenLogprobs } = logprobs as Json;
    if (endpoint === 'chat.completions' && content !== undefined && content !== null) {
      if (!Array.isArray(content)) problems.push(`choices[${i}].logprobs.content is not an array`);
      else if (!content.every((e) => e !== null && typeof e === 'object' && isLogprob((e as Json).logprob))) {
        problems.push(`choices[${i}].logprobs.content holds an entry without a log-prob (a finite number ≤ 0)`);
      }
    }
    if (endpoint === 'completions' && tokenLogprobs !== undefined && tokenLogprobs !== null) {
      // null is a real entry: the first prompt token's when the prompt is echoed.
      if (!Array.isArray(tokenLogprobs) || !tokenLogprobs.every((v) => v === null || isLogprob(v))) {
        problems.push(`choices[${i}].logprobs.token_logprobs is not an array of log-probs (finite numbers ≤ 0)`);
      }
    }
  });
  return problems[0] ?? null;
}

function isObject(value: unknown): boolean {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function isTokenId(value: unknown): boolean {
  return Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) < 2 ** 32;
}

function isLogprob(value: unknown): boolean {
  return typeof value === 'number' && Number.isFinite(value) && value <= 0;
}

/** Usage as the backend counts it, from the token ids, for a response that carries none (a stream not asked for it). */
export function usageFromTokens(promptIds: number[] | null, choices: ChoiceTokens[]): Json | null {
  if (promptIds === null || choices.some((c) => c.completionIds === null)) return null;
  const completion = choices.reduce((sum, c) => sum + (c.completionIds as number[]).length, 0);
  return { prompt_tokens: promptIds.length, completion_tokens: completion, total_tokens: promptIds.length + completion };
}

/** Token ids, log-probs and finish reasons of a complete (non-streamed or assembled) response. */
export function extractTokens(
  endpoint: CallEndpoint,
  response: Json,
): { promptIds: number[] | null; choices: ChoiceTokens[]; usage: unknown } {
  if (endpoint === 'responses') return { promptIds: null, choices: [], usage: response.usage ?? null };
  const choices = [...((response.choices as Json[] | undefined) ?? [])].sort(
    (a, b) => (a.index as number) - (b.index as number),
  );
  const first = choices[0];
  const promptIds =
    endpoint === 'chat.completions' ? response.prompt_token_ids : first ? first.prompt_token_ids : undefined;
  return {
    promptIds: Array.isArray(promptIds) ? (promptIds as number[]) : null,
    choices: choices.map((choice) => ({
      completionIds: Array.isArray(choice.token_ids) ? (choice.token_ids as number[]) : null,
      logprobs: logprobsOf(endpoint, choice),
      finishReason: typeof choice.finish_reason === 'string' ? choice.finish_reason : null,
    })),
    usage: response.usage ?? null,
  };
}

function logprobsOf(endpoint: CallEndpoint, choice: Json): number[] | null {
  const logprobs = choice.logprobs as Json | null | undefined;
  if (!logprobs) return null;
  if (endpoint === 'chat.completions') {
    const content = logprobs.content as Array<{ logprob: number }> | null | undefined;
    return content ? content.map((c) => c.logprob) : null;
  }
  const tokenLogprobs = logprobs.token_logprobs as number[] | null | undefined;
  return tokenLogprobs ?? null;
}

/** The response as journaled: token-id arrays live in the store's compact columns, not in the JSON. */
export function withoutTokenIds(response: Json): Json {
  const copy: Json = { ...response };
  delete copy.prompt_token_ids;
  if (Array.isArray(copy.choices)) {
    copy.choices = (copy.choices as Json[]).map((choice) => {
      const { token_ids: _ids, prompt_token_ids: _prompt, ...rest } = choice;
      return rest;
    });
  }
  return copy;
}

export interface SseEvent {
  /** The event exactly as received, including its terminating blank line. */
  raw: string;
  /** Its data lines joined, or null for a comment / keep-alive. */
  data: string | null;
}

/**
 * Splits a text/event-stream into events as bytes arrive. Each piece is searched once: an event
 * of many megabytes costs one pass over its pieces, not one pass over all of it per piece.
 */
export class SseParser {
  /** The pieces of the event not yet ended. */
  private pending: string[] = [];
  /** Their last characters: the start of an event end ("\r\n\r\n" at most) split across pieces. */
  private tail = '';

  push(text: string): SseEvent[] {
    const events: SseEvent[] = [];
    let rest = text;
    for (;;) {
      const probe = this.tail + rest;
      const match = /\r?\n\r?\n/.exec(probe);
      if (!match) {
        if (rest !== '') this.pending.push(rest);
        this.tail = probe.slice(-3);
        return events;
      }
      // No event end lies wholly in the pending pieces (it would have ended an event already), so this one ends in `rest`.
      const end = match.index + match[0].length - this.tail.length;
      this.pending.push(rest.slice(0, end));
      const raw = this.pending.join('');
      events.push({ raw, data: dataOf(raw) });
      this.pending = [];
      this.tail = '';
      rest = rest.slice(end);
    }
  }

  /** Whatever arrived after the last complete event (non-empty means the stream was cut mid-event). */
  rest(): string {
    return this.pending.join('');
  }
}

function dataOf(raw: string): string | null {
  // Most events are one `data: …` line and the blank line that ends them.
  const firstBreak = raw.indexOf('\n');
  if (firstBreak === raw.length - 2 && raw.startsWith('data: ') && raw.charCodeAt(firstBreak - 1) !== 13) return raw.slice(6, firstBreak);
  const lines = raw.split(/\r?\n/).filter((line) => line.startsWith('data:'));
  if (lines.length === 0) return null;
  return lines.map((line) => line.slice(line.startsWith('data: ') ? 6 : 5)).join('\n');
}

interface ChoiceParts {
  index: number;
  role: string | undefined;
  content: string[];
  reasoning: string[];
  text: string[];
  toolCalls: Map<number, { id?: string; type?: string; name: string[]; arguments: string[] }>;
  tokenIds: number[] | null;
  promptIds: number[] | null;
  chatLogprobs: unknown[] | null;
  tokenLogprobs: number[] | null;
  finishReason: string | null;
  stopReason: unknown;
}

/** Rebuilds the complete response from stream chunks, for the journal. */
export class StreamAssembler {
  private head: Json = {};
  private promptIds: number[] | null = null;
  private usage: unknown = null;
  private readonly choices = new Map<number, ChoiceParts>();
  private completed: Json | undefined;

  constructor(private readonly endpoint: CallEndpoint) {}

  add(chunk: Json): void {
    if (this.endpoint === 'responses') {
      if (chunk.type === 'response.completed' && chunk.response) this.completed = chunk.response as Json;
      return;
    }
    if (!this.head.id) this.head = { id: chunk.id, created: chunk.created, model: chunk.model };
    if (Array.isArray(chunk.prompt_token_ids)) this.promptIds = chunk.prompt_token_ids as number[];
    if (chunk.usage) this.usage = chunk.usage;
    for (const choice of (chunk.choices as Json[] | undefined) ?? []) this.addChoice(choice);
  }

  response(): Json {
    if (this.endpoint === 'responses') return this.completed ?? {};
    const chat = this.endpoint === 'chat.completions';
    const choices = [...this.choices.values()]
      .sort((a, b) => a.index - b.index)
      .map((c) => {
        const out: Json = { index: c.index, finish_reason: c.finishReason };
        if (chat) {
          // As in a non-streamed response: a reply that is only tool calls has null content.
          const text = c.content.join('');
          const content = text !== '' ? text : c.toolCalls.size > 0 || c.content.length === 0 ? null : '';
          const message: Json = { role: c.role ?? 'assistant', content };
          if (c.reasoning.length) message.reasoning_content = c.reasoning.join('');
          if (c.toolCalls.size) {
            message.tool_calls = [...c.toolCalls.entries()]
              .sort(([a], [b]) => a - b)
              .map(([, call]) => ({
                id: call.id,
                type: call.type ?? 'function',
                function: { name: call.name.join(''), arguments: call.arguments.join('') },
              }));
          }
          out.message = message;
          out.logprobs = c.chatLogprobs ? { content: c.chatLogprobs } : null;
        } else {
          out.text = c.text.join('');
          out.logprobs = c.tokenLogprobs ? { token_logprobs: c.tokenLogprobs } : null;
          if (c.promptIds) out.prompt_token_ids = c.promptIds;
        }
        if (c.stopReason !== undefined) out.stop_reason = c.stopReason;
        if (c.tokenIds) out.token_ids = c.tokenIds;
        return out;
      });
    const response: Json = { ...this.head, object: chat ? 'chat.completion' : 'text_completion', choices };
    if (this.promptIds) response.prompt_token_ids = this.promptIds;
    if (this.usage) response.usage = this.usage;
    return response;
  }

  private addChoice(choice: Json): void {
    const index = (choice.index as number) ?? 0;
    let parts = this.choices.get(index);
    if (!parts) {
      parts = {
        index,
        role: undefined,
        content: [],
        reasoning: [],
        text: [],
        toolCalls: new Map(),
        tokenIds: null,
        promptIds: null,
        chatLogprobs: null,
        tokenLogprobs: null,
        finishReason: null,
        stopReason: undefined,
      };
      this.choices.set(index, parts);
    }
    const delta = choice.delta as Json | undefined;
    if (delta) {
      if (typeof delta.role === 'string') parts.role = delta.role;
      if (typeof delta.content === 'string') parts.content.push(delta.content);
      const reasoning = delta.reasoning_content ?? delta.reasoning;
      if (typeof reasoning === 'string') parts.reasoning.push(reasoning);
      for (const call of (delta.tool_calls as Json[] | undefined) ?? []) {
        const at = (call.index as number) ?? 0;
        let entry = parts.toolCalls.get(at);
        if (!entry) parts.toolCalls.set(at, (entry = { name: [], arguments: [] }));
        if (typeof call.id === 'string') entry.id = call.id;
        if (typeof call.type === 'string') entry.type = call.type;
        const fn = call.function as Json | undefined;
        if (typeof fn?.name === 'string') entry.name.push(fn.name);
        if (typeof fn?.arguments === 'string') entry.arguments.push(fn.arguments);
      }
    }
    if (typeof choice.text === 'string') parts.text.push(choice.text);
    if (Array.isArray(choice.token_ids)) (parts.tokenIds ??= []).push(...(choice.token_ids as number[]));
    if (Array.isArray(choice.prompt_token_ids)) parts.promptIds = choice.prompt_token_ids as number[];
    const logprobs = choice.logprobs as Json | null | undefined;
    if (logprobs && Array.isArray(logprobs.content)) (parts.chatLogprobs ??= []).push(...(logprobs.content as unknown[]));
    if (logprobs && Array.isArray(logprobs.token_logprobs)) {
      (parts.tokenLogprobs ??= []).push(...(logprobs.token_logprobs as number[]));
    }
    if (typeof choice.finish_reason === 'string') parts.finishReason = choice.finish_reason;
    if (choice.stop_reason !== undefined && choice.stop_reason !== null) parts.stopReason = choice.stop_reason;
  }
}
