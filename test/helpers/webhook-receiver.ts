import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NotificationEvent } from '../../src/notify/events.js';

export interface Received {
  headers: http.IncomingHttpHeaders;
  text: string;
  body: NotificationEvent;
  answered: number;
}

/** A webhook receiver: answers 503 to the first `failFirst` deliveries (or all, with Infinity), then 204. */
export async function startReceiver() {
  const received: Received[] = [];
  let failFirst = 0;
  const server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (d: Buffer) => (text += d.toString()));
    req.on('end', () => {
      const answered = received.length < failFirst ? 503 : 204;
      received.push({ headers: req.headers, text, body: JSON.parse(text) as NotificationEvent, answered });
      res.writeHead(answered).end(answered === 503 ? 'receiver down' : undefined);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/rein?token=abc`,
    received,
    failing: (n: number) => (failFirst = n),
    reset: () => {
      received.length = 0;
      failFirst = 0;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export type WebhookReceiver = Awaited<ReturnType<typeof startReceiver>>;
