import type { TokenInSpec } from '../routing.js';

type Json = Record<string, unknown>;

/** A chat request with its prompt given as token ids, in the field the backend reads them from. */
export function withPromptIds<T extends Json>(body: T, ids: number[], field: TokenInSpec['field']): T {
  if (field === 'prompt_token_ids') return { ...body, prompt_token_ids: ids };
  const params = body.kv_transfer_params;
  const kept = params !== null && typeof params === 'object' && !Array.isArray(params) ? params : {};
  return { ...body, kv_transfer_params: { ...kept, prompt_token_ids: ids } };
}

/** The prompt ids a chat request was sent with (token in), from either field; undefined when it went as text. */
export function promptIdsSent(body: unknown): number[] | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const { prompt_token_ids: direct, kv_transfer_params: params } = body as Json;
  const ids = direct ?? (params !== null && typeof params === 'object' ? (params as Json).prompt_token_ids : undefined);
  return Array.isArray(ids) && ids.every((id) => typeof id === 'number') ? (ids as number[]) : undefined;
}
