import { translationOf } from '../apis/registry.js';
import { ApiRequestError } from '../apis/translation.js';
import { REDACTION_MARK } from '../gateway/redact.js';
import { promptIdsSent } from '../gateway/token-in/sent-ids.js';
import type { ChatTokenizer, ChatRequest } from '../tokenizer/chat-tokenizer.js';
import { ContentPartError } from '../tokenizer/content-parts.js';
import type { CallRecord } from '../store/trace-store.js';
import { commonPrefixLength } from '../store/token-codec.js';
import type { MergeCall } from './merge.js';

export interface DriftReport {
  /** Calls whose engine ids were compared with the re-rendered prompt. */
  compared: number;
  /** Of those, calls whose re-rendered prompt ids differ from the engine's. */
  drifted: number;
  /** Calls without engine ids whose prompt and reply were rendered and tokenized here. */
  retokenized: number;
  /** Calls left out: failed calls, or calls without ids and nothing to re-render them with (or media parts). */
  unusable: number;
}

type Json = Record<string, unknown>;

/**
 * Journaled calls → what the merger takes. Calls with the engine's token ids are used as they
 * are; with the model's tokenizer at hand, their prompts are also re-rendered to measure drift.
 * Calls without ids are re-rendered with the model's own chat template and tokenizer (no old
 * log-probs then: the trainer must recompute them).
 */
export function toMergeCalls(
  calls: readonly CallRecord[],
  tokenizer: ChatTokenizer | undefined,
): { calls: MergeCall[]; drift: DriftReport } {
  const drift: DriftReport = { compared: 0, drifted: 0, retokenized: 0, unusable: 0 };
  const out: MergeCall[] = [];
  for (const call of calls) {
    if (call.status !== 'ok' || !call.choices) {
      drift.unusable++;
      continue;
    }
    if (call.promptIds) {
      const rendered = tokenizer && rerendered(call, tokenizer);
      if (rendered) {
        drift.compared++;
        if (
          rendered.length !== call.promptIds.length ||
          commonPrefixLength(rendered, call.promptIds) !== rendered.length
        )
          drift.drifted++;
      }
      out.push({
        callId: call.id,
        policyVersion: call.policyVersion,
        promptIds: call.promptIds,
        choices: call.choices,
        extends: call.promptExtends ?? null,
      });
      continue;
    }
    const retokenized = tokenizer ? textOnly(() => retokenize(call, tokenizer)) : undefined;
    if (!retokenized) {
      drift.unusable++;
      continue;
    }
    drift.retokenized++;
    out.push(retokenized);
  }
  return { calls: out, drift };
}

/**
 * What a call's chat prompt re-renders to, to compare with the engine's ids; undefined when it is
 * not a chat call, or holds parts a text template cannot render (images for a multimodal engine).
 */
function rerendered(call: CallRecord, tokenizer: ChatTokenizer): number[] | undefined {
  // Sent token in (samples.merge: tito): the ids the gateway sent are the prompt the engine had to use.
  const sent = promptIdsSent(call.requestSent);
  if (sent) return sent;
  const chat = chatRequestOf(call);
  return chat && textOnly(() => tokenizer.promptIds(chat));
}

/**
 * A call's prompt as a chat request: a chat call's own; a Responses or Messages call's as sent
 * when the gateway translated it (it sent the backend chat), or translated here when it was sent
 * to the backend as it came (`nativeApis`: then what was sent is what was received, but for the
 * model's name).
 */
export function chatRequestOf(call: CallRecord): ChatRequest | undefined {
  const request = call.requestSent as Json;
  const translation = translationOf(call.endpoint);
  if (!translation) return Array.isArray(request.messages) ? (request as unknown as ChatRequest) : undefined;
  if (!sentAsReceived(call)) return request as unknown as ChatRequest;
  try {
    return translation.toChat(request) as unknown as ChatRequest;
  } catch (err) {
    // A request only the backend could read (a chained Responses call sent as it came): nothing to render.
    if (err instanceof ApiRequestError) return undefined;
    throw err;
  }
}

function sentAsReceived(call: CallRecord): boolean {
  const { model: _sent, ...sent } = call.requestSent as Json;
  const { model: _received, ...received } = call.requestReceived as Json;
  return JSON.stringify(sent) === JSON.stringify(received);
}

/** A call's replies as chat assistant messages with their finish reasons. */
export function repliesOf(call: CallRecord): Array<{ message: Json; finishReason: string | null }> {
  const response = call.response as Json | undefined;
  if (!response) return [];
  const translation = translationOf(call.endpoint);
  if (translation) {
    const message = translation.assistantMessageOf(response) as unknown as Json;
    return [{ message, finishReason: Array.isArray(message.tool_calls) ? 'tool_calls' : null }];
  }
  const choices = (response.choices as Json[] | undefined) ?? [];
  return choices.map((choice) => ({
    message: (choice.message ?? { role: 'assistant', content: choice.text ?? '' }) as Json,
    finishReason: (choice.finish_reason as string | null) ?? null,
  }));
}

/** Undefined for a conversation with non-text content parts (see content-parts.ts); other errors throw. */
function textOnly<T>(render: () => T): T | undefined {
  try {
    return render();
  } catch (err) {
    if (err instanceof ContentPartError) return undefined;
    throw err;
  }
}

/**
 * A reply the gateway redacted (see withoutSecretIds): it journaled no ids for it, and its text
 * is not what the policy wrote, so its call is not trained on.
 */
function redactedReply(reply: { message: Json }): boolean {
  return JSON.stringify(reply.message).includes(REDACTION_MARK);
}

function retokenize(call: CallRecord, tokenizer: ChatTokenizer): MergeCall | undefined {
  const replies = repliesOf(call);
  if (replies.length === 0 || replies.some(redactedReply)) return undefined;
  const request = call.requestSent as Json;
  if (call.endpoint === 'completions') {
    if (typeof request.prompt !== 'string') return undefined;
    return {
      callId: call.id,
      policyVersion: call.policyVersion,
      promptIds: tokenizer.encode(request.prompt),
      choices: replies.map((reply) => ({
        completionIds: tokenizer.encode(String(reply.message.content ?? '')),
        logprobs: null,
        finishReason: reply.finishReason,
      })),
    };
  }
  const chat = chatRequestOf(call);
  if (!chat) return undefined;
  return {
    callId: call.id,
    policyVersion: call.policyVersion,
    promptIds: tokenizer.promptIds(chat),
    choices: replies.map((reply) => ({
      completionIds: tokenizer.completionIds(chat, reply.message),
      logprobs: null,
      finishReason: reply.finishReason,
    })),
  };
}
