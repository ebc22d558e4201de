import type http from 'node:http';
import { errorReply, sleep } from './replies.js';

/**
 * The `fault:*` models that break a call outright, answered here: `fault:500` (the engine
 * crashed), `fault:garbage` (a 200 that is not JSON), `fault:reset` (the connection dropped).
 * True when the model was one of them.
 */
export function breakCall(model: string, res: http.ServerResponse): boolean {
  if (model === 'fault:500') {
    errorReply(res, 500, 'InternalServerError', 'engine crashed');
    return true;
  }
  if (model === 'fault:garbage') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('<html>not json</html>');
    return true;
  }
  if (model === 'fault:reset') {
    res.socket?.destroy();
    return true;
  }
  return false;
}

/**
 * The wait before a `fault:slow:<ms>` (its headers delayed) or `fault:hold` call (until the test's
 * `release()`) is answered as the toy model would; undefined for any other model.
 */
export function faultDelay(model: string, holding: Array<() => void>): Promise<unknown> | undefined {
  if (model.startsWith('fault:slow:')) return sleep(Number(model.split(':')[2]));
  if (model === 'fault:hold') return new Promise<void>((resolve) => holding.push(resolve));
  return undefined;
}
