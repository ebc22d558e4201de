import type { ChatCompletionTokenLogprob } from 'openai/resources/chat/completions';
import type { CompletionUsage } from 'openai/resources/completions';
import type { Model } from 'openai/resources/models';

/**
 * The OpenAI / vLLM messages as the gateway reads them. The gateway is a proxy: every message is
 * any JSON object, and what it does not read passes through untouched. The fields it reads are
 * named here, typed as far as the gateway has checked them: a harness's values are the harness's
 * (even of a wrong type, they are the backend's to refuse), and a backend's are checked by
 * responseProblem before tokens are read from them.
 */
export type JsonObject = { [key: string]: unknown };

/** A harness's request body (chat, completions or responses): the fields the gateway compares, never trusts. */
export interface RequestBody extends JsonObject {
  /** An alias or policy version (OpenAI's `model`); any value reaches routing, which refuses what it does not know. */
  model?: unknown;
  stream?: unknown;
  stream_options?: unknown;
  /** vLLM's: whether the response carries token ids. */
  return_token_ids?: unknown;
  logprobs?: unknown;
  top_logprobs?: unknown;
}

/**
 * Chat's per-token log-prob entry (OpenAI's ChatCompletionTokenLogprob): `logprob` is checked, the rest passes through.
 */
export type TokenLogprob = Pick<ChatCompletionTokenLogprob, 'logprob'> & JsonObject;

/**
 * A choice's log-probs: chat's `content`, or completions' `token_logprobs` (null for an echoed prompt's first token).
 */
export interface ChoiceLogprobs extends JsonObject {
  content?: TokenLogprob[] | null;
  token_logprobs?: Array<number | null> | null;
}

/** A tool call's piece in a stream chunk; its values are read where they are strings. */
export interface ToolCallDelta extends JsonObject {
  index?: unknown;
  id?: unknown;
  type?: unknown;
  /** `{ name, arguments }` pieces, each read where it is a string. */
  function?: unknown;
}

/** What a stream chunk adds to a chat choice's message. */
export interface ChoiceDelta extends JsonObject {
  role?: unknown;
  content?: unknown;
  /** vLLM's reasoning parsers name it either way. */
  reasoning_content?: unknown;
  reasoning?: unknown;
  tool_calls?: ToolCallDelta[] | null;
}

/** A choice of a chat or completions response or stream chunk, with vLLM's token ids (≥ 0.10.2). */
export interface BackendChoice extends JsonObject {
  index?: number;
  token_ids?: number[] | null;
  /** Completions put the prompt's ids on each choice. */
  prompt_token_ids?: number[] | null;
  logprobs?: ChoiceLogprobs | null;
  delta?: ChoiceDelta | null;
  text?: unknown;
  finish_reason?: unknown;
  /** vLLM's: the stop string or token id that ended the choice. */
  stop_reason?: unknown;
}

/**
 * A backend's response or stream chunk once responseProblem passed it (chat and completions). A
 * Responses API message is read only for its `type`, `response` and `usage`.
 */
export interface BackendResponse extends JsonObject {
  id?: unknown;
  created?: unknown;
  model?: unknown;
  /** Chat puts the prompt's ids at the top level. */
  prompt_token_ids?: number[] | null;
  choices?: BackendChoice[];
  usage?: unknown;
  type?: unknown;
  response?: unknown;
}

/** Usage as the backend counts it. */
export type Usage = Pick<CompletionUsage, 'prompt_tokens' | 'completion_tokens' | 'total_tokens'>;

/** A backend's model card (vLLM adds `max_model_len`, `root`, …): only its id is read. */
export type ModelCard = Pick<Model, 'id'> & JsonObject;

/**
 * GET /v1/models: each alias and version the gateway routes, with its backend's card and the policy version it reaches.
 */
export interface ModelList {
  object: 'list';
  data: Array<ModelCard & { policy_version: string }>;
}
