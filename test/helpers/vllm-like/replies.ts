import type http from 'node:http';

/** How the stand-in writes to the wire: JSON bodies, and the broken replies of `fault:cut`. */
export function json(res: http.ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** An error body as vLLM writes it (OpenAI's shape, the status repeated as `code`). */
export function errorReply(res: http.ServerResponse, status: number, type: string, message: string) {
  json(res, status, { error: { message, type, param: null, code: status } });
}

/** Lets what was written reach the peer, then breaks the connection as a crashed server would. */
export async function cutAfterFlush(res: http.ServerResponse) {
  await sleep(20);
  res.socket?.destroy();
}

export function halfThenReset(res: http.ServerResponse) {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
  res.write('{"id": "chatcmpl-toy", "choi');
  setTimeout(() => res.socket?.destroy(), 10);
}

export function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms));
}

/** How streamed replies are cut into chunks: `chunkSize` characters (tokens) each, `chunkDelayMs` apart. */
export interface Streaming {
  chunkSize: number;
  chunkDelayMs?: number;
}
