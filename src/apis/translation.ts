import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParams,
} from 'openai/resources/chat/completions';

/**
 * The OpenAI Responses API and the Anthropic Messages API, each spoken as a translation of the
 * chat-completions API: a request becomes the chat request that asks the model for the same thing,
 * and the chat answer (whole or streamed) becomes the API's own answer. One translation per API,
 * used by the embedded policy server (its `/v1/responses` and `/v1/messages`), by the gateway
 * (which sends a backend the chat request, so every backend that gives token ids for chat gives
 * them for these APIs too) and by retokenization (which renders the chat request with the
 * model's own template). The chat request and answer carry vLLM's extras (`return_token_ids`,
 * `prompt_token_ids`, `token_ids`) untouched; the translated answer never shows them.
 */
export interface ApiTranslation<Request = Record<string, unknown>, Answer = Record<string, unknown>> {
  /**
   * The chat request asking for what `request` asks, or an `ApiRequestError` naming the field the
   * chat API cannot honor (never a field silently dropped). `model` is copied as it is.
   */
  toChat(request: Request): ChatRequestBody;
  /** The API's answer for a whole chat completion (its first choice: these APIs have no `n`). */
  fromChat(chat: ChatCompletion, request: Request): Answer;
  /** A translator of one streamed chat completion into the API's server-sent events. */
  streamFromChat(request: Request): ChatStreamTranslator<Answer>;
  /** The chat assistant message (content, tool calls, reasoning) an answer of this API holds. */
  assistantMessageOf(answer: Answer): ChatAssistantMessage;
  /** The API's error body for a refusal (each API has its own error shape). */
  errorBody(status: number, type: string, message: string): Record<string, unknown>;
}

/** A streamed chat completion becoming the API's events: fed chunk by chunk, then ended. */
export interface ChatStreamTranslator<Answer> {
  /** The SSE text (`event: …\ndata: …\n\n` frames) this chunk produces; '' for none. */
  chunk(chunk: ChatCompletionChunk): string;
  /** The SSE text that closes the stream (its last events). */
  end(): string;
  /** The whole answer the stream told, as a non-streamed call would have answered (for the journal). */
  answer(): Answer;
}

/** A chat request as sent to a backend: the openai shape plus vLLM's extras. */
export type ChatRequestBody = ChatCompletionCreateParams & {
  return_token_ids?: boolean;
  chat_template_kwargs?: Record<string, unknown>;
  top_k?: number;
};

export interface ChatAssistantMessage {
  role: 'assistant';
  content: string | null;
  reasoning_content?: string;
  tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
}

/** A request this API cannot honor as asked: the status, the API's error type, and what to change. */
export class ApiRequestError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiRequestError';
  }
}
