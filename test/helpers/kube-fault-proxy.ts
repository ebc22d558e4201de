import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import type { KubeControlPlane } from './kube-control-plane.js';

/**
 * An HTTPS proxy in front of the real apiserver that can answer chosen requests with an error
 * instead of passing them on: the one fault the real control plane does not make on request (a
 * busy or restarting apiserver's 503 to one write). Everything else, watches included, streams
 * through unchanged; clients keep their own credentials (bearer tokens pass through).
 */
export interface KubeFaultProxy {
  url: string;
  /** The same config, its cluster reached through the proxy (its certificate is from the cluster's CA). */
  kubeConfig(config: KubeConfig): KubeConfig;
  /** Answers the next `count` requests that `match` picks with `status` and a Status object, passing nothing on. */
  failNext(count: number, status: number, match: (req: { method: string; url: string }) => boolean): void;
  /** How many requests were failed so far. */
  failed(): number;
  close(): Promise<void>;
}

export async function startKubeFaultProxy(plane: KubeControlPlane): Promise<KubeFaultProxy> {
  const upstream = new URL(plane.server);
  const cert = plane.ca.issue(`fault-proxy-${Date.now()}`, {
    commonName: 'rein-kube-fault-proxy',
    dnsNames: ['localhost'],
    ips: ['127.0.0.1'],
  });
  let rule: { left: number; status: number; match: (req: { method: string; url: string }) => boolean } | undefined;
  let failures = 0;
  const server = https.createServer({ cert: cert.cert, key: cert.key }, (req, res) => {
    const request = { method: req.method ?? 'GET', url: req.url ?? '/' };
    if (rule && rule.left > 0 && rule.match(request)) {
      rule.left -= 1;
      failures += 1;
      const status = {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `the test's fault proxy failed ${request.method} ${request.url}`,
        reason: 'ServiceUnavailable',
        code: rule.status,
      };
      res.writeHead(rule.status, { 'content-type': 'application/json' }).end(JSON.stringify(status));
      return;
    }
    const forward = https.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: request.method,
        path: request.url,
        headers: { ...req.headers, host: upstream.host },
        ca: plane.ca.cert,
      },
      (answer: IncomingMessage) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        // A watch sends its headers long before any event: pass them on now, as the apiserver did.
        res.flushHeaders();
        answer.pipe(res);
      },
    );
    forward.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`the test's fault proxy could not reach the apiserver: ${err.message}`);
    });
    res.on('close', () => forward.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    kubeConfig(config) {
      const copy = new KubeConfig();
      copy.loadFromOptions({
        clusters: config.clusters.map((c) => ({ ...c, server: url })),
        contexts: config.contexts,
        currentContext: config.currentContext,
        users: config.users,
      });
      return copy;
    },
    failNext(count, status, match) {
      rule = { left: count, status, match };
    },
    failed: () => failures,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
