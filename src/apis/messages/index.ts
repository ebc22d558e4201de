import type { Message } from '@anthropic-ai/sdk/resources/messages/messages';
import type { ApiTranslation } from '../translation.js';
import { messagesErrorBody } from './errors.js';
import { assistantMessageOf, fromChat } from './from-chat.js';
import type { MessagesRequest } from './request.js';
import { MessageStreamTranslator } from './stream-from-chat.js';
import { toChat } from './to-chat.js';
import type { ToolArgumentsStyle } from './tool-arguments.js';

export type { MessagesRequest } from './request.js';
export type { ToolArgumentsStyle } from './tool-arguments.js';

/**
 * The Anthropic Messages API as a translation of chat completions, writing tool-call inputs back
 * into arguments in `style` (tool-arguments.ts: `compact` for the embedded policy's models,
 * `python` for backends whose tool parser re-serializes arguments as Python's json.dumps does).
 */
export function messagesTranslationFor(style: ToolArgumentsStyle): ApiTranslation<MessagesRequest, Message> {
  return {
    toChat: (request) => toChat(request, style),
    fromChat: (chat, request) => fromChat(chat, request),
    streamFromChat: (request) => new MessageStreamTranslator(request.model),
    assistantMessageOf: (answer) => assistantMessageOf(answer, style),
    errorBody: messagesErrorBody,
  };
}

/** The Messages translation with compact tool arguments (JSON.stringify), as the embedded policy writes them. */
export const messagesTranslation = messagesTranslationFor('compact');
