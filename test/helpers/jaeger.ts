import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './ports.js';

/**
 * Jaeger's all-in-one program as a real OTLP backend for the tracing tests: an OTLP/HTTP receiver
 * and the query API, each on a free port, with in-memory storage. The binary comes from
 * scripts/build-jaeger.sh (run by scripts/setup-tests.sh, which npm test runs), or REIN_JAEGER_BIN.
 */
export interface Jaeger {
  /** The OTLP/HTTP traces URL to export to. */
  otlpUrl: string;
  /** The query API's base (its /api/traces/{id} answers with Jaeger's JSON). */
  queryUrl: string;
  /** A trace as the query API holds it now; undefined when Jaeger has none with that id (yet). */
  trace(traceId: string): Promise<JaegerTrace | undefined>;
  close(): Promise<void>;
}

export interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string }>;
}

export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: Array<{ refType: string; traceID: string; spanID: string }>;
  /** Microseconds since the epoch. */
  startTime: number;
  duration: number;
  tags: Array<{ key: string; type: string; value: unknown }>;
  logs: Array<{ timestamp: number; fields: Array<{ key: string; type: string; value: unknown }> }>;
  processID: string;
}

const root = path.resolve(import.meta.dirname, '../..');

export function jaegerBinary(): string {
  const binary = process.env.REIN_JAEGER_BIN ?? path.join(root, '.tools', 'jaeger', 'jaeger');
  if (!existsSync(binary)) {
    throw new Error(
      `Jaeger (the tracing tests' OTLP backend) is not built on this machine: ${binary} does not exist. ` +
        'Build it with scripts/build-jaeger.sh (needs Go; minutes, once per machine; scripts/setup-tests.sh, which npm test runs, runs it), or point REIN_JAEGER_BIN at a jaeger binary.',
    );
  }
  return binary;
}

export async function startJaeger(): Promise<Jaeger> {
  const binary = jaegerBinary();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-jaeger-'));
  const [otlp, queryHttp, queryGrpc, health] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const config = path.join(dir, 'config.yaml');
  writeFileSync(config, jaegerConfig({ otlp, queryHttp, queryGrpc, health }));
  const child: ChildProcess = spawn(binary, ['--config', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const keep = (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-20_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited: string | undefined;
  child.once('exit', (code, signal) => {
    exited = `exited with ${code ?? signal}`;
  });
  const queryUrl = `http://127.0.0.1:${queryHttp}`;
  const otlpUrl = `http://127.0.0.1:${otlp}/v1/traces`;
  // Ready when both the query API answers and the receiver takes an (empty) export.
  for (;;) {
    if (exited) throw new Error(`jaeger ${exited} before it was ready:\n${log}`);
    const ready = await Promise.all([
      fetch(`${queryUrl}/api/services`).then(
        (r) => r.ok,
        () => false,
      ),
      fetch(otlpUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"resourceSpans":[]}',
      }).then(
        (r) => r.ok,
        () => false,
      ),
    ]);
    if (ready.every(Boolean)) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    otlpUrl,
    queryUrl,
    async trace(traceId) {
      const res = await fetch(`${queryUrl}/api/traces/${traceId}`);
      if (res.status === 404) return undefined;
      if (!res.ok) throw new Error(`jaeger query answered ${res.status}: ${await res.text()}`);
      const body = (await res.json()) as { data?: JaegerTrace[] };
      return body.data?.[0];
    },
    async close() {
      if (!exited) {
        const gone = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await gone;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The all-in-one's configuration: the OTLP/HTTP receiver, batched (50 ms) into in-memory storage,
 * the query API over HTTP and gRPC, a health check; everything on loopback, no metrics of its own.
 */
function jaegerConfig(ports: { otlp: number; queryHttp: number; queryGrpc: number; health: number }): string {
  return `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:${ports.health}
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: 127.0.0.1:${ports.queryHttp}
    grpc:
      endpoint: 127.0.0.1:${ports.queryGrpc}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${ports.otlp}
processors:
  batch:
    timeout: 50ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`;
}

/** A span's tags as an object. */
export function tagsOf(span: Pick<JaegerSpan, 'tags'>): Record<string, unknown> {
  return Object.fromEntries(span.tags.map((t) => [t.key, t.value]));
}

/** The span (its id) a span is the child of, if any. */
export function parentOf(span: JaegerSpan): string | undefined {
  return span.references.find((r) => r.refType === 'CHILD_OF')?.spanID;
}
