import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { ZodError } from 'zod';
import {
  fromChat,
  responsesErrorBody,
  ResponsesStream,
  toChat,
  type ResponsesRequest,
} from '../apis/responses/index.js';
import { ApiRequestError } from '../apis/translation.js';
import { answerChat, chatChunks, prepareChat, type ChatRouteOptions } from './chat-route.js';
import { HttpError, startStream, streamed } from './policy-http.js';

/**
 * POST /v1/responses: the OpenAI Responses API, answered as the chat request its translation
 * (src/apis/responses) makes — the same prompt rendering, generation and tool-call parsing as
 * /v1/chat/completions, so a conversation trains the same whichever API the harness speaks.
 * Refusals come in OpenAI's error shape.
 */
export async function responsesRoute(app: FastifyInstance, options: ChatRouteOptions): Promise<void> {
  app.post('/v1/responses', async (req, reply) => {
    const request = req.body as ResponsesRequest;
    try {
      const call = prepareChat(options, toChat(request));
      if (!request.stream) return fromChat(await answerChat(options, call), request);
      const stream = new ResponsesStream(request);
      let res: ServerResponse | undefined;
      // Rows of a failed stream may still be going: nothing goes out after its end.
      const write = chatChunks(options, call, (chunk) => {
        if (res && !res.writableEnded) res.write(stream.chunk(chunk as ChatCompletionChunk));
      });
      // Bad requests were refused above, before the stream began.
      res = startStream(reply);
      await streamed(res, write, { done: () => stream.end(), failed: (message) => stream.failed(message) });
    } catch (err) {
      const { status, type, message } = refusalOf(err);
      return reply.code(status).send(responsesErrorBody(status, type, message));
    }
  });
}

/** OpenAI's error type for a status: it answers every 4xx (an unknown model too) as an invalid request. */
function openaiErrorType(status: number): string {
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

/** A refusal (the translation's, or the chat route's) as its status, OpenAI error type and message. */
function refusalOf(err: unknown): { status: number; type: string; message: string } {
  if (err instanceof ApiRequestError) return { status: err.status, type: err.type, message: err.message };
  if (err instanceof HttpError) return { status: err.status, type: openaiErrorType(err.status), message: err.message };
  if (err instanceof ZodError) {
    // The translated chat request failed the chat route's checks: name its fields as the chat API does.
    const issues = err.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ');
    return { status: 400, type: 'invalid_request_error', message: `the translated chat request: ${issues}` };
  }
  const status = (err as { statusCode?: number }).statusCode;
  if (status !== undefined && status >= 400 && status < 500)
    return { status, type: 'invalid_request_error', message: (err as Error).message };
  return { status: 500, type: 'server_error', message: (err as Error).message };
}
