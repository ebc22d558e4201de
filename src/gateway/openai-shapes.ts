import type { CallEndpoint, ChoiceTokens } from '../store/trace-store.js';
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
  usage: boolean;
}

export const NOTHING_INJECTED: Injected = { tokenIds: false, logprobs: false, usage: false };

export function upstreamRequest(
  endpoint: CallEndpoint,
  body: Json,
  model: string,
  backend: BackendSpec,
): { sent: Json; injected: Injected } {
  const sent: Json = { ...body, model };
  if (endpoint === 'responses') return { sent, injected: NOTHING_INJECTED };
  const injected: Injected = { tokenIds: false, logprobs: false, usage: false };
  if (backend.tokenIds && body.return_token_ids !== true) {
    sent.return_token_ids = true;
    injected.tokenIds = true;
  }
  const asked = endpoint === 'chat.completions' ? body.logprobs === true : typeof body.logprobs === 'number';
  if (backend.logprobs && !asked) {
    sent.logprobs = endpoint === 'chat.completions' ? true : 0;
    injected.logprobs = true;
  }
  const streamOptions = body.stream_options as Json | undefined;
  if (body.stream === true && streamOptions?.include_usage !== true) {
    sent.stream_options = { ...streamOptions, include_usage: true };
    injected.usage = true;
  }
  return { sent, injected };
}

export function anythingInjected(injected: Injected): boolean {
  return injected.tokenIds || injected.logprobs || injected.usage;
}

/**
 * Removes what the gateway injected from a response or stream chunk, in place. Returns false
 * for a chunk the harness would not have received at all (the usage-only final chunk).
 */
export function stripInjected(message: Json, injected: Injected): boolean {
  const choices = (message.choices as Json[] | undefined) ?? [];
  if (injected.usage) {
    if (choices.length === 0 && message.usage) return false;
    delete message.usage;
  }
  if (injected.tokenIds) {
    delete message.prompt_token_ids;
    for (const choice of choices) {
      delete choice.token_ids;
      delete choice.prompt_token_ids;
    }
  }
  if (injected.logprobs) for (const choice of choices) choice.logprobs = null;
  return true;
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

/** Splits a text/event-stream into events as bytes arrive. */
export class SseParser {
  private buffer = '';

  push(text: string): SseEvent[] {
    this.buffer += text;
    const events: SseEvent[] = [];
    for (;;) {
      const match = /\r?\n\r?\n/.exec(this.buffer);
      if (!match) break;
      const end = match.index + match[0].length;
      const raw = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end);
      events.push({ raw, data: dataOf(raw) });
    }
    return events;
  }

  /** Whatever arrived after the last complete event (non-empty means the stream was cut mid-event). */
  rest(): string {
    return this.buffer;
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
