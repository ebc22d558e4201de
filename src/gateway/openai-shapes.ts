import type { CallEndpoint, ChoiceTokens } from '../store/trace-store.js';
import {
  addition,
  applyEdits,
  elementsOf,
  membersOf,
  removals,
  skipSpace,
  StructuralScan,
  type Edit,
} from './json-text.js';
import type { BackendChoice, BackendResponse, JsonObject, RequestBody, Usage } from './openai-types.js';
import type { BackendSpec } from './routing.js';

/**
 * The OpenAI / vLLM wire shapes the gateway touches: what it adds to a request, what it takes
 * back out of the response before the harness sees it, and where token ids and log-probs live
 * (vLLM ≥ 0.10.2: chat puts prompt ids at the top level, completions on each choice; streams put
 * prompt ids on the first chunk and each chunk's completion ids on its choices).
 * The types of what is read: openai-types.ts.
 */

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
  body: RequestBody,
  text: string,
  model: string,
  backend: BackendSpec,
  unstreamed = false,
): { sent: RequestBody; sentText: string; injected: Injected } {
  const object = membersOf(text, skipSpace(text, 0));
  const edits: Edit[] = [];
  const sent: RequestBody = { ...body };
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
  // The Responses and Messages APIs sent as they came (a backend serving them itself) have no token-id fields to ask.
  if (endpoint === 'responses' || endpoint === 'messages')
    return { sent, sentText: withoutStreamOptions(applyEdits(text, edits)), injected };
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
    return applyEdits(
      edited,
      removals(membersOf(edited, skipSpace(edited, 0)).members, (m) => m.key === 'stream_options'),
    );
  }
}

export function anythingInjected(injected: Injected): boolean {
  return injected.tokenIds || injected.logprobs;
}

/**
 * Removes what the gateway injected from a parsed response or stream chunk, in place (for the
 * journal, which keeps what the harness got). Adds nothing the backend did not send.
 */
export function stripInjected(message: BackendResponse, injected: Injected): void {
  const choices: unknown[] = Array.isArray(message.choices) ? message.choices : [];
  if (injected.tokenIds) delete message.prompt_token_ids;
  for (const choice of choices) {
    if (choice === null || typeof choice !== 'object') continue;
    const c = choice as BackendChoice;
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
    if (injected.tokenIds)
      edits.push(...removals(choice.members, (m) => m.key === 'token_ids' || m.key === 'prompt_token_ids'));
    for (const field of choice.members) {
      if (injected.logprobs && field.key === 'logprobs')
        edits.push({ start: field.valueStart, end: field.valueEnd, text: 'null' });
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
export function responseProblem(endpoint: CallEndpoint, message: JsonObject, chunk = false): string | null {
  if (endpoint === 'responses' || endpoint === 'messages') return null;
  const problems: string[] = [];
  const ids = (value: unknown, where: string) => {
    if (value === undefined || value === null) return;
    if (!Array.isArray(value)) problems.push(`${where} is not an array`);
    else if (!value.every(isTokenId))
      problems.push(`${where} holds a value that is not a token id (an integer in [0, 2^32))`);
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
    const c = choice as JsonObject;
    if (c.index !== undefined && !(Number.isSafeInteger(c.index) && (c.index as number) >= 0))
      problems.push(`choices[${i}].index is not a non-negative integer`);
    if (chunk && c.delta !== undefined && c.delta !== null) {
      const delta = c.delta as JsonObject;
      if (typeof delta !== 'object' || Array.isArray(delta)) problems.push(`choices[${i}].delta is not an object`);
      else if (
        delta.tool_calls !== undefined &&
        delta.tool_calls !== null &&
        !(Array.isArray(delta.tool_calls) && delta.tool_calls.every(isObject))
      ) {
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
    const { content, token_logprobs: tokenLogprobs } = logprobs as JsonObject;
    if (endpoint === 'chat.completions' && content !== undefined && content !== null) {
      if (!Array.isArray(content)) problems.push(`choices[${i}].logprobs.content is not an array`);
      else if (!content.every((e) => e !== null && typeof e === 'object' && isLogprob((e as JsonObject).logprob))) {
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
export function usageFromTokens(promptIds: number[] | null, choices: ChoiceTokens[]): Usage | null {
  if (promptIds === null || choices.some((c) => c.completionIds === null)) return null;
  const completion = choices.reduce((sum, c) => sum + (c.completionIds as number[]).length, 0);
  return {
    prompt_tokens: promptIds.length,
    completion_tokens: completion,
    total_tokens: promptIds.length + completion,
  };
}

/** Token ids, log-probs and finish reasons of a complete (non-streamed or assembled) response. */
export function extractTokens(
  endpoint: CallEndpoint,
  response: BackendResponse,
): { promptIds: number[] | null; choices: ChoiceTokens[]; usage: unknown } {
  if (endpoint === 'responses' || endpoint === 'messages')
    return { promptIds: null, choices: [], usage: response.usage ?? null };
  const choices = [...(response.choices ?? [])].sort((a, b) => (a.index as number) - (b.index as number));
  const first = choices[0];
  const promptIds =
    endpoint === 'chat.completions' ? response.prompt_token_ids : first ? first.prompt_token_ids : undefined;
  return {
    promptIds: Array.isArray(promptIds) ? promptIds : null,
    choices: choices.map((choice) => ({
      completionIds: Array.isArray(choice.token_ids) ? choice.token_ids : null,
      logprobs: logprobsOf(endpoint, choice),
      finishReason: typeof choice.finish_reason === 'string' ? choice.finish_reason : null,
    })),
    usage: response.usage ?? null,
  };
}

function logprobsOf(endpoint: CallEndpoint, choice: BackendChoice): number[] | null {
  const logprobs = choice.logprobs;
  if (!logprobs) return null;
  if (endpoint === 'chat.completions') {
    const content = logprobs.content;
    return content ? content.map((c) => c.logprob) : null;
  }
  // An echoed prompt's first entry is null, kept as the backend sent it.
  return (logprobs.token_logprobs as number[] | null | undefined) ?? null;
}

/** The response as journaled: token-id arrays live in the store's compact columns, not in the JSON. */
export function withoutTokenIds(response: BackendResponse): BackendResponse {
  const copy: BackendResponse = { ...response };
  delete copy.prompt_token_ids;
  if (Array.isArray(copy.choices)) {
    copy.choices = copy.choices.map((choice) => {
      const { token_ids: _ids, prompt_token_ids: _prompt, ...rest } = choice;
      return rest;
    });
  }
  return copy;
}
