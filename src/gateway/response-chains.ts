import { ApiRequestError } from '../apis/translation.js';
import type { CallRecord, TraceStore } from '../store/trace-store.js';
import type { JsonObject, RequestBody } from './openai-types.js';
import type { ProxiedCall } from './proxied-call.js';

/** Conversations remembered at most (each a response id's items); older ones are read from the journal again. */
const REMEMBERED = 2000;

/**
 * The Responses API's `previous_response_id`, kept by the gateway: a response it journaled (one of
 * the same rollout attempt's, stored: `store` not false) stands for its whole conversation, the
 * input items that led to it and its output items. Instructions are not carried over, as in
 * OpenAI's API. The journal is the truth, so chains survive a gateway restart and work against
 * stateless backends such as vLLM.
 */
export class ResponseChains {
  private readonly conversations = new Map<string, unknown[]>();

  constructor(private readonly store: TraceStore) {}

  /** The request with its chain replaced by the items it stands for; the request itself when it has none. */
  async expanded(call: ProxiedCall): Promise<RequestBody> {
    const previous = call.body.previous_response_id;
    if (previous === undefined || previous === null) return call.body;
    if (typeof previous !== 'string')
      throw new ApiRequestError(400, 'invalid_request_error', 'previous_response_id must be a string (a response id)');
    const history = await this.conversation(previous, call);
    const { previous_response_id: _chain, ...rest } = call.body;
    return { ...rest, input: [...history, ...inputItems(call.body.input)] };
  }

  /**
   * Remembers a stored answer's conversation as it is journaled (its request's expanded input and
   * its output items), so the next call of the chain reads nothing from the journal.
   */
  answered(request: RequestBody, expandedInput: unknown, answer: unknown): void {
    if (request.store === false || answer === null || typeof answer !== 'object') return;
    const { id, output } = answer as JsonObject;
    if (typeof id !== 'string') return;
    this.remember(id, [...inputItems(expandedInput), ...(Array.isArray(output) ? output : [])]);
  }

  private async conversation(responseId: string, call: ProxiedCall): Promise<unknown[]> {
    const known = this.conversations.get(responseId);
    if (known) return known;
    const calls = await this.store.listCalls(call.rolloutId, call.attempt);
    const byResponse = new Map<string, CallRecord>();
    for (const c of calls) {
      const id = storedResponseId(c);
      if (id !== undefined) byResponse.set(id, c);
    }
    // Oldest first: each conversation builds on the one before it, already remembered.
    const chain: CallRecord[] = [];
    for (let id: string | undefined = responseId; id !== undefined && !this.conversations.has(id);) {
      const c = byResponse.get(id);
      if (!c) {
        if (id === responseId) throw notFound(responseId);
        break;
      }
      chain.unshift(c);
      const before = (c.requestReceived as JsonObject).previous_response_id;
      id = typeof before === 'string' ? before : undefined;
    }
    for (const c of chain) {
      const request = c.requestReceived as JsonObject;
      const before = typeof request.previous_response_id === 'string' ? request.previous_response_id : undefined;
      const prior = before === undefined ? [] : this.conversations.get(before);
      if (prior === undefined) throw notFound(before as string);
      const output = ((c.response as JsonObject).output as unknown[] | undefined) ?? [];
      this.remember(storedResponseId(c) as string, [...prior, ...inputItems(request.input), ...output]);
    }
    return this.conversations.get(responseId) as unknown[];
  }

  private remember(id: string, items: unknown[]): void {
    this.conversations.delete(id);
    this.conversations.set(id, items);
    if (this.conversations.size > REMEMBERED)
      this.conversations.delete(this.conversations.keys().next().value as string);
  }
}

/** The id of a Responses call's answer the API lets a later call chain to, if it has one. */
function storedResponseId(call: CallRecord): string | undefined {
  if (call.endpoint !== 'responses' || call.status !== 'ok') return undefined;
  if ((call.requestReceived as JsonObject | undefined)?.store === false) return undefined;
  const id = (call.response as JsonObject | undefined)?.id;
  return typeof id === 'string' ? id : undefined;
}

/** A request's `input` as items: a string is one user message. */
function inputItems(input: unknown): unknown[] {
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: input }];
  return Array.isArray(input) ? input : [];
}

function notFound(responseId: string): ApiRequestError {
  return new ApiRequestError(
    400,
    'invalid_request_error',
    `Previous response with id '${responseId}' not found: the gateway keeps the stored responses (store not false) ` +
      'of the same rollout attempt only',
  );
}
