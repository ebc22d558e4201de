import type { ServerResponse } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ZodError } from 'zod';
import { messagesTranslation, type MessagesRequest } from '../apis/messages/index.js';
import { sseFrame } from '../apis/messages/stream-from-chat.js';
import { ApiRequestError, type ChatStreamTranslator } from '../apis/translation.js';
import { answerChat, chatChunks, prepareChat, type ChatRouteOptions } from './chat-route.js';
import { HttpError, startStream, streamed, type StreamEnding } from './policy-http.js';

/**
 * POST /v1/messages: the Anthropic Messages API, translated to a chat request (src/apis/messages)
 * and answered by the chat route's own generation, whole or streamed as Anthropic's events. Every
 * refusal (the translation's, the chat route's, an unknown model) is in Anthropic's error shape,
 * which Anthropic's SDKs read. Like the chat route, it asks for no key: the SDKs send theirs as
 * `x-api-key`, and it is not checked.
 */
export async function messagesRoute(app: FastifyInstance, options: ChatRouteOptions): Promise<void> {
  app.post('/v1/messages', { errorHandler: replyError }, async (req, reply) => {
    const request = req.body as MessagesRequest;
    const chat = messagesTranslation.toChat(request);
    // message_start tells the prompt's size, read from the first chunk's prompt ids (left out of the events).
    const call = prepareChat(options, chat.stream ? { ...chat, return_token_ids: true } : chat);
    // ChatReply is the chat.completion the chat route sends (vLLM's extras included): read as one.
    if (!call.body.stream) return messagesTranslation.fromChat((await answerChat(options, call)) as never, request);
    const translator = messagesTranslation.streamFromChat(request);
    let res: ServerResponse | undefined;
    const write = chatChunks(options, call, (chunk) => {
      if (res && !res.writableEnded) res.write(translator.chunk(chunk as never));
    });
    res = startStream(reply);
    await streamed(res, write, messagesEnding(translator));
  });
  // The Messages API's other endpoints (count_tokens, batches) are not served: said in its shape.
  app.all('/v1/messages/*', { errorHandler: replyError }, async (req) => {
    throw new ApiRequestError(404, 'not_found_error', `no route ${req.method} ${req.url.split('?')[0] ?? ''}`);
  });
}

/**
 * How a Messages stream ends: its last events, or after a failure once it had begun an `error`
 * event in Anthropic's shape, as Anthropic ends one (the SDKs raise it) — never vLLM's `[DONE]`.
 */
function messagesEnding(translator: ChatStreamTranslator<unknown>): StreamEnding {
  return {
    done: () => translator.end(),
    failed: (message) => {
      const { error } = messagesTranslation.errorBody(500, 'api_error', message);
      return sseFrame({ type: 'error', error: error as object });
    },
  };
}

function replyError(err: FastifyError, _req: FastifyRequest, reply: FastifyReply) {
  const { status, type, message } = describeError(err);
  void reply.code(status).send(messagesTranslation.errorBody(status, type, message));
}

function describeError(err: unknown): { status: number; type: string; message: string } {
  if (err instanceof ApiRequestError || err instanceof HttpError)
    return { status: err.status, type: err.type, message: err.message };
  if (err instanceof ZodError)
    return {
      status: 400,
      type: 'invalid_request_error',
      message: err.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; '),
    };
  const status = (err as { statusCode?: number }).statusCode;
  if (status !== undefined && status >= 400 && status < 500)
    return { status, type: '', message: (err as Error).message };
  return { status: 500, type: 'api_error', message: (err as Error).message };
}
