import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * What a server says about a request that failed before any route saw it: each server answers in its own error shape.
 */
export interface ClientErrorShape {
  body(status: number, code: string, message: string): unknown;
  /** Which setting bounds how long a request may take to arrive, for the 408's message. */
  timeoutSetting?: string;
}

/**
 * A Node `clientErrorHandler` (a request Node's HTTP parser refused, or one that took too long to
 * arrive) answering in the server's own error shape, never the framework's.
 */
export function clientErrorAnswer(shape: ClientErrorShape): (err: Error & { code?: string }, socket: Duplex) => void {
  return (err, socket) => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const [status, code, message] = describeClientError(err, shape.timeoutSetting);
    if (!socket.writable) return void socket.destroy();
    const body = JSON.stringify(shape.body(status, code, message));
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  };
}

function describeClientError(
  err: Error & { code?: string },
  timeoutSetting: string | undefined,
): [number, string, string] {
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    return [
      431,
      'request_too_large',
      'the request line and headers are over the size limit; send a shorter URL (fewer or shorter query parameters) and fewer headers',
    ];
  }
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    const setting = timeoutSetting ? ` (${timeoutSetting})` : '';
    return [408, 'request_timeout', `the request was not received in time${setting}; send it whole, faster`];
  }
  return [400, 'invalid_request', `the request could not be parsed as HTTP (${err.code ?? err.message})`];
}
