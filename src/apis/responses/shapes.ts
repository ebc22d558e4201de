import { randomBytes } from 'node:crypto';
import type { ChatCompletionTokenLogprob } from 'openai/resources/chat/completions';
import type {
  Response,
  ResponseCreateParamsBase,
  ResponseOutputText,
  ResponseTextDeltaEvent,
  ResponseUsage,
} from 'openai/resources/responses/responses';

/**
 * The Responses API's request and answer as this translation reads and writes them: the `openai`
 * package's types, plus the fields OpenAI's API takes and answers that the package's create
 * params lack (`top_logprobs`, `max_tool_calls`), and less `output_text`, which the SDK computes
 * on the client (OpenAI's JSON never carries it).
 */
export type ResponsesRequest = ResponseCreateParamsBase & {
  top_logprobs?: number | null;
  max_tool_calls?: number | null;
};

export type ResponsesAnswer = Omit<Response, 'output_text'> & {
  store: boolean;
  top_logprobs: number;
};

/** OpenAI's id shape: a prefix (`resp`, `msg`, `fc`, `rs`) and 32 random hex digits. */
export function newId(prefix: 'resp' | 'msg' | 'fc' | 'rs' | 'call'): string {
  return `${prefix}_${randomBytes(16).toString('hex')}`;
}

/**
 * The answer's fields that echo the request, as OpenAI fills them (its defaults where the request
 * gave none). `temperature` and `top_p` stay null when not given: the backend's own default then
 * applied (vLLM reads it from the model's generation config), which this module cannot know.
 */
export function echoedFields(request: ResponsesRequest) {
  return {
    background: false,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    metadata: request.metadata ?? {},
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: request.reasoning ?? { effort: null, summary: null },
    service_tier: request.service_tier ?? 'default',
    store: request.store ?? true,
    temperature: request.temperature ?? null,
    text: request.text ?? { format: { type: 'text' as const } },
    tool_choice: request.tool_choice ?? ('auto' as const),
    tools: request.tools ?? [],
    top_logprobs: request.top_logprobs ?? 0,
    top_p: request.top_p ?? null,
    truncation: request.truncation ?? ('disabled' as const),
    ...(request.user !== undefined && { user: request.user }),
  };
}

/** The head of an answer: who it is, when, and what it echoes; the output and status come after. */
export function responseHead(
  request: ResponsesRequest,
  id: string,
  createdAt: number,
  model: string,
): Omit<ResponsesAnswer, 'output' | 'status'> {
  return {
    id,
    object: 'response',
    created_at: createdAt,
    model,
    error: null,
    incomplete_details: null,
    ...echoedFields(request),
  };
}

/** Chat usage (as vLLM and OpenAI give it) as the Responses API counts it. */
export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
}

export function usageOf(usage: ChatUsage): ResponseUsage {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: usage.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
  };
}

/** Chat token log-probs as an `output_text` part carries them (with bytes). */
export function partLogprobs(tokens: readonly ChatCompletionTokenLogprob[]): ResponseOutputText.Logprob[] {
  return tokens.map((t) => ({
    token: t.token,
    logprob: t.logprob,
    bytes: t.bytes ?? [],
    top_logprobs: (t.top_logprobs ?? []).map((top) => ({
      token: top.token,
      logprob: top.logprob,
      bytes: top.bytes ?? [],
    })),
  }));
}

/** Chat token log-probs as an `output_text.delta` event carries them (without bytes). */
export function deltaLogprobs(tokens: readonly ChatCompletionTokenLogprob[]): ResponseTextDeltaEvent.Logprob[] {
  return tokens.map((t) => ({
    token: t.token,
    logprob: t.logprob,
    top_logprobs: (t.top_logprobs ?? []).map((top) => ({ token: top.token, logprob: top.logprob })),
  }));
}
