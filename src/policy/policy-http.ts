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

/**
 * Writes a stream's events, then its end. A failure once the stream has begun (its 200 is sent)
 * ends it with an error event, as vLLM does, so no client waits for an end that never comes.
 */
export async function streamed(res: ServerResponse, write: () => Promise<void>): Promise<void> {
  try {
    await write();
  } catch (err) {
    res.write(
      `data: ${JSON.stringify(errorBody(500, 'InternalServerError', `generation failed: ${(err as Error).message}`))}\n\n`,
    );
  }
  res.end('data: [DONE]\n\n');
}
