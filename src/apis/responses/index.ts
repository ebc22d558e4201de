import type { ApiTranslation } from '../translation.js';
import { assistantMessageOf, fromChat } from './from-chat.js';
import type { ResponsesAnswer, ResponsesRequest } from './shapes.js';
import { ResponsesStream } from './stream-from-chat.js';
import { toChat } from './to-chat.js';

/**
 * The OpenAI Responses API as a translation of chat completions (translation.ts). Pure: no HTTP,
 * no state kept between calls — `previous_response_id` is the gateway's to expand into items.
 */

/** OpenAI's error shape: `{error: {message, type, param, code}}` (type such as `invalid_request_error`). */
export function responsesErrorBody(_status: number, type: string, message: string) {
  return { error: { message, type, param: null, code: null } };
}

export const responsesTranslation: ApiTranslation<ResponsesRequest, ResponsesAnswer> = {
  toChat,
  fromChat: (chat, request) => fromChat(chat, request),
  streamFromChat: (request) => new ResponsesStream(request),
  assistantMessageOf,
  errorBody: responsesErrorBody,
};

export { ResponsesStream, toChat, fromChat, assistantMessageOf };
export type { ResponsesAnswer, ResponsesRequest };
export type { ChatAnswer } from './from-chat.js';
