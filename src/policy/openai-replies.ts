import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionTokenLogprob,
} from 'openai/resources/chat/completions';
import type { Completion, CompletionUsage } from 'openai/resources/completions';
import type { Model } from 'openai/resources/models';

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

/** Completions' log-probs as vLLM fills them (no top log-probs, no offsets). */
export type CompletionLogprobs = {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: null;
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

export function usageOf(promptTokens: number, completionTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
}
