import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';

/** A refusal of the policy server: vLLM's error type (`BadRequestError`, `NotFoundError`, …) and status. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

/** The error body of every answer that is not a success: vLLM's shape, which holds Rein's {code, message}. */
export function errorBody(status: number, type: string, message: string) {
  return { error: { message, type, param: null, code: status } };
}

/** Begins a text/event-stream answer on the raw response (Fastify no longer sends this reply). */
export function startStream(reply: FastifyReply): ServerResponse {
  void reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  return res;
}

/** The text a stream ends with: after its last event, or after a failure once it had begun. */
export interface StreamEnding {
  done(): string;
  failed(message: string): string;
}

/** vLLM's ending: an error chunk after a failure, and `data: [DONE]` either way. */
const vllmEnding: StreamEnding = {
  done: () => 'data: [DONE]\n\n',
  failed: (message) => `data: ${JSON.stringify(errorBody(500, 'InternalServerError', message))}\n\ndata: [DONE]\n\n`,
};

/**
 * Writes a stream's events, then its end. A failure once the stream has begun (its 200 is sent)
 * ends it with an error event, as vLLM does, so no client waits for an end that never comes. The
 * other APIs' routes end their streams their own way (the Responses API: no `[DONE]`).
 */
export async function streamed(
  res: ServerResponse,
  write: () => Promise<void>,
  ending: StreamEnding = vllmEnding,
): Promise<void> {
  let last: string;
  try {
    await write();
    last = ending.done();
  } catch (err) {
    last = ending.failed(`generation failed: ${(err as Error).message}`);
  }
  res.end(last);
}
