import { REDACTION_MARK } from '../gateway/redact.js';
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
    const request = call.requestSent as Json;
    if (call.promptIds) {
      const rendered = tokenizer && rerendered(call, request, tokenizer);
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
    const retokenized = tokenizer ? textOnly(() => retokenize(call, request, tokenizer)) : undefined;
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
function rerendered(call: CallRecord, request: Json, tokenizer: ChatTokenizer): number[] | undefined {
  if (call.endpoint !== 'chat.completions' || !Array.isArray(request.messages)) return undefined;
  return textOnly(() => tokenizer.promptIds(request as unknown as ChatRequest));
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
function redactedReply(choice: Json): boolean {
  return JSON.stringify(choice.message ?? choice.text ?? null).includes(REDACTION_MARK);
}

function retokenize(call: CallRecord, request: Json, tokenizer: ChatTokenizer): MergeCall | undefined {
  const response = call.response as Json | undefined;
  const choices = (response?.choices as Json[] | undefined) ?? [];
  if (choices.length === 0 || choices.some(redactedReply)) return undefined;
  if (call.endpoint === 'chat.completions' && Array.isArray(request.messages)) {
    const chat = request as unknown as ChatRequest;
    return {
      callId: call.id,
      policyVersion: call.policyVersion,
      promptIds: tokenizer.promptIds(chat),
      choices: choices.map((choice) => ({
        completionIds: tokenizer.completionIds(chat, choice.message as Json),
        logprobs: null,
        finishReason: (choice.finish_reason as string | null) ?? null,
      })),
    };
  }
  if (call.endpoint === 'completions' && typeof request.prompt === 'string') {
    return {
      callId: call.id,
      policyVersion: call.policyVersion,
      promptIds: tokenizer.encode(request.prompt),
      choices: choices.map((choice) => ({
        completionIds: tokenizer.encode(String(choice.text ?? '')),
        logprobs: null,
        finishReason: (choice.finish_reason as string | null) ?? null,
      })),
    };
  }
  return undefined;
}
