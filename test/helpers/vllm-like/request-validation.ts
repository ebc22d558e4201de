import type { Json } from './toy-model.js';

/** What vLLM's request validation refuses (with a 400) among the parameters the gateway might add. */
export function wrongType(path: string, body: Json): string | undefined {
  const present = (key: string) => body[key] !== undefined && body[key] !== null;
  if (present('return_token_ids') && typeof body.return_token_ids !== 'boolean')
    return 'return_token_ids: Input should be a valid boolean';
  const options = body.stream_options as Json | null | undefined;
  if (
    options &&
    options.include_usage !== undefined &&
    options.include_usage !== null &&
    typeof options.include_usage !== 'boolean'
  ) {
    return 'stream_options.include_usage: Input should be a valid boolean';
  }
  if (path === '/v1/chat/completions') {
    if (present('logprobs') && typeof body.logprobs !== 'boolean') return 'logprobs: Input should be a valid boolean';
    if (present('top_logprobs') && body.logprobs !== true)
      return 'when using `top_logprobs`, `logprobs` must be set to true.';
  }
  if (path === '/v1/completions' && present('logprobs') && !Number.isInteger(body.logprobs))
    return 'logprobs: Input should be a valid integer';
  return undefined;
}
