import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionTokenLogprob,
} from 'openai/resources/chat/completions';
import type { Completion, CompletionUsage } from 'openai/resources/completions';
import type { Model } from 'openai/resources/models';
import type { ChatTokenizer } from '../tokenizer/chat-tokenizer.js';

/**
 * What the policy server answers: OpenAI's shapes (the `openai` package's types, as far as the
 * server fills them) with vLLM's additions — token ids when asked (`return_token_ids`), and the
 * stop string or token id that ended each choice (`stop_reason`).
 */

export type Usage = Pick<CompletionUsage, 'prompt_tokens' | 'completion_tokens' | 'total_tokens'>;

/** vLLM's `stop_reason`: the stop string or token id that ended the choice, null at the length limit. */
type StopReason = number | string | null;

export type ChatLogprobs = { content: ChatCompletionTokenLogprob[] } | null;

export interface ChatChoice {
  index: number;
  message: { role: 'assistant'; content: string | null; tool_calls?: ChatCompletionMessageFunctionToolCall[] };
  logprobs: ChatLogprobs;
  finish_reason: ChatCompletion.Choice['finish_reason'];
  stop_reason: StopReason;
  token_ids?: number[];
}

export type ChatReply = Pick<ChatCompletion, 'id' | 'created' | 'model' | 'object'> & {
  choices: ChatChoice[];
  usage: Usage;
  prompt_token_ids?: number[];
};

export interface ChatChunkChoice {
  index: number;
  delta: {
    role?: 'assistant';
    content?: string;
    tool_calls?: Array<ChatCompletionMessageFunctionToolCall & { index: number }>;
  };
  logprobs: ChatLogprobs;
  finish_reason: ChatCompletionChunk.Choice['finish_reason'];
  stop_reason?: StopReason;
  token_ids?: number[];
}

/** A chunk's fields besides the stream's id, creation time, model and object, which every chunk repeats. */
export interface ChatChunkBody {
  choices: ChatChunkChoice[];
  usage?: Usage;
  prompt_token_ids?: number[];
}

/** A whole stream chunk as sent. */
export type ChatChunk = Pick<ChatCompletionChunk, 'id' | 'created' | 'model' | 'object'> & ChatChunkBody;

/** Completions' log-probs as vLLM fills them: top log-probs by token text when asked, no offsets. */
export type CompletionLogprobs = {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Array<Record<string, number>> | null;
  text_offset: number[];
} | null;

export interface CompletionReplyChoice {
  index: number;
  text: string;
  logprobs: CompletionLogprobs;
  finish_reason: 'stop' | 'length' | null;
  stop_reason?: StopReason;
  prompt_token_ids?: number[];
  token_ids?: number[];
}

/** A completion, or (with one choice, or none and the usage) one chunk of its stream. */
export type CompletionReply = Pick<Completion, 'id' | 'created' | 'model' | 'object'> & {
  choices: CompletionReplyChoice[];
  usage?: Usage;
};

/** GET /v1/models: each served version, with vLLM's context length. */
export interface ModelList {
  object: 'list';
  data: Array<
    Pick<Model, 'id' | 'object' | 'created' | 'owned_by'> & { root: string; parent: null; max_model_len: number }
  >;
}

/** What a row's log-probs are read from: its token ids, their log-probs, and each step's most likely tokens. */
export interface RowLogprobs {
  ids: readonly number[];
  logprobs: readonly number[];
  top: ReadonlyArray<ReadonlyArray<{ id: number; logprob: number }>>;
}

/**
 * A token's bytes. The embedded vocabulary is byte-level (chat-format.ts: id = byte value), so a
 * token below 256 is its one byte — even the first byte of a character, whose text alone is U+FFFD;
 * a special token is its text's UTF-8.
 */
export function tokenBytes(tokenizer: ChatTokenizer, id: number): number[] {
  return id < 256 ? [id] : [...Buffer.from(tokenizer.decode([id]), 'utf8')];
}

/** Chat log-probs as OpenAI shapes them: each token's text, log-prob and bytes, with its top alternatives. */
export function chatLogprobs(tokenizer: ChatTokenizer, row: RowLogprobs): ChatCompletionTokenLogprob[] {
  const entry = (id: number, logprob: number) => ({
    token: tokenizer.decode([id]),
    logprob,
    bytes: tokenBytes(tokenizer, id),
  });
  return row.ids.map((id, i) => ({
    ...entry(id, row.logprobs[i] as number),
    top_logprobs: (row.top[i] ?? []).map((t) => entry(t.id, t.logprob)),
  }));
}

/**
 * Completions' top log-probs as OpenAI's legacy API and vLLM give them: per token, the k most
 * likely by text, and the drawn token too (so up to k + 1); none at k = 0, as before.
 */
export function completionTopLogprobs(
  tokenizer: ChatTokenizer,
  row: RowLogprobs,
  k: number,
): Array<Record<string, number>> | null {
  if (k === 0) return null;
  return row.ids.map((id, i) => {
    const top: Record<string, number> = {};
    for (const t of row.top[i] ?? []) top[tokenizer.decode([t.id])] ??= t.logprob;
    top[tokenizer.decode([id])] ??= row.logprobs[i] as number;
    return top;
  });
}

export function usageOf(promptTokens: number, completionTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
}
