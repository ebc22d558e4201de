import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { ContainerProcess, LogLine } from './container-process.js';

/**
 * The kubelet's HTTPS port as far as `pods/log` needs it: the apiserver proxies
 * GET /api/v1/namespaces/{ns}/pods/{pod}/log to GET /containerLogs/{ns}/{pod}/{container} on the
 * node's InternalIP and kubeletEndpoint port, with the query the kubelet reads (follow, previous,
 * timestamps, sinceSeconds, sinceTime, tailLines, limitBytes, stream). Served with a certificate
 * from the cluster's CA (the apiserver checks it: --kubelet-certificate-authority), and only to
 * clients with a certificate from that CA (the apiserver's --kubelet-client-certificate); the
 * kubelet would also ask the apiserver whether that client may read logs, which this does not.
 */
export interface ContainerLogs {
  /** The container's current run and the one before it (after a restart); undefined: no such pod or container. */
  runs(
    namespace: string,
    pod: string,
    container: string,
  ): { current?: ContainerProcess; previous?: ContainerProcess; waiting?: string } | undefined;
}

export interface KubeletServer {
  port: number;
  close(): Promise<void>;
}

export async function startKubeletServer(
  tls: { cert: string; key: string; ca: string },
  logs: ContainerLogs,
): Promise<KubeletServer> {
  const server = https.createServer({ ...tls, requestCert: true, rejectUnauthorized: true }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://node');
    const match = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(url.pathname);
    if (req.method !== 'GET' || !match) {
      res
        .writeHead(404, { 'content-type': 'text/plain' })
        .end(
          `the node agent serves only GET /containerLogs/{namespace}/{pod}/{container}, not ${req.method} ${url.pathname}`,
        );
      return;
    }
    const [namespace, pod, container] = match.slice(1).map(decodeURIComponent) as [string, string, string];
    serveLogs(logs, namespace, pod, container, url.searchParams, req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function serveLogs(
  logs: ContainerLogs,
  namespace: string,
  pod: string,
  container: string,
  query: URLSearchParams,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  const fail = (status: number, message: string): void =>
    void res.writeHead(status, { 'content-type': 'text/plain' }).end(message);
  const runs = logs.runs(namespace, pod, container);
  if (!runs) return fail(404, `pod "${pod}" does not exist or has no container "${container}"`);
  // The kubelet's own messages (validateContainerLogStatus).
  const run = query.get('previous') === 'true' ? runs.previous : runs.current;
  if (!run) {
    if (query.get('previous') === 'true')
      return fail(400, `previous terminated container "${container}" in pod "${pod}" not found`);
    return fail(
      400,
      `container "${container}" in pod "${pod}" is waiting to start: ${runs.waiting ?? 'ContainerCreating'}`,
    );
  }
  const stream = query.get('stream') ?? 'All';
  if (!['All', 'Stdout', 'Stderr'].includes(stream)) return fail(400, `invalid stream type "${stream}"`);
  const since = query.has('sinceSeconds')
    ? Date.now() - Number(query.get('sinceSeconds')) * 1000
    : query.has('sinceTime')
      ? Date.parse(query.get('sinceTime') as string)
      : undefined;
  const wanted = (line: LogLine) =>
    (stream === 'All' || line.stream === stream.toLowerCase()) && (since === undefined || line.time.getTime() >= since);
  const timestamps = query.get('timestamps') === 'true';
  let bytesLeft = query.has('limitBytes') ? Number(query.get('limitBytes')) : Infinity;

  res.writeHead(200, { 'content-type': 'text/plain' });
  const write = (line: LogLine): boolean => {
    const text = timestamps ? `${line.time.toISOString()} ${line.text}` : line.text;
    const bytes = Buffer.from(text);
    res.write(bytes.subarray(0, Math.min(bytes.length, bytesLeft)));
    bytesLeft -= bytes.length;
    return bytesLeft > 0;
  };
  let lines = run.log.filter(wanted);
  if (query.has('tailLines')) {
    const tail = Number(query.get('tailLines'));
    lines = tail === 0 ? [] : lines.slice(-tail);
  }
  for (const line of lines) {
    if (!write(line)) return void res.end();
  }
  if (query.get('follow') !== 'true') return void res.end();
  const stop = run.follow((line) => {
    if (line === undefined) return void res.end();
    if (wanted(line) && !write(line)) {
      stop();
      res.end();
    }
  });
  req.once('close', stop);
}
