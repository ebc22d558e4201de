import type { ChatCompletion } from 'openai/resources/chat/completions';

/** A vLLM chat completion: one choice, vLLM's extras included. */
export function chatCompletion(
  message: Record<string, unknown>,
  finish: string,
  stopReason: unknown = null,
): ChatCompletion {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 0,
    model: 'policy',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: null, refusal: null, ...message },
        logprobs: null,
        finish_reason: finish,
        stop_reason: stopReason,
        token_ids: [1, 2, 3],
      },
    ],
    usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 },
    prompt_token_ids: [9, 9],
  } as unknown as ChatCompletion;
}
