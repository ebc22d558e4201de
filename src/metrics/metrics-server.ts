import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { exposition } from './registry.js';

export interface MetricsServer {
  /** http://host:port/metrics */
  url: string;
  close(): Promise<void>;
}

/**
 * A server of its own for /metrics, for a process that serves nothing else over HTTP (the
 * worker). No auth: it binds where the config says (loopback by default), as exporters do.
 */
export async function startMetricsServer(
  registry: Registry,
  listen: { host: string; port: number },
  service: string,
  setting: string,
): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`${service} serves GET /metrics only\n`);
      return;
    }
    exposition(registry).then(
      ({ contentType, text }) => res.writeHead(200, { 'content-type': contentType }).end(text),
      (err: Error) =>
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`collecting metrics failed: ${err.message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new Error(
              `${service} metrics: port ${listen.port} on ${listen.host} is in use; choose another with ${setting}`,
            )
          : err,
      ),
    );
    server.listen(listen.port, listen.host, resolve);
  });
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  return {
    url: `http://${host}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
