import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log/logger.js';
import type { TracingOptions } from '../../src/telemetry/gateway-tracing.js';
import { startTestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/ports.js';

// Exporting traces must never slow or fail a model call: a trace backend that is down, or that
// takes exports and never answers, costs spans (counted and logged), not calls.

const options = (endpoint: string, overrides: Partial<TracingOptions> = {}): TracingOptions => ({
  endpoint,
  headers: {},
  serviceName: 'rein-gateway-test',
  content: false,
  maxQueueSize: 2048,
  batchDelayMs: 10,
  exportTimeoutMs: 500,
  ...overrides,
});

async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 20));
}

/** A server that takes every request and never answers it. */
async function silentServer(): Promise<{ url: string; received: () => number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let received = 0;
  const server = http.createServer(() => {
    received++;
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    received: () => received,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('trace export that fails', () => {
  it('drops and counts spans when the backend is down, logs it once, and every call still succeeds', async () => {
    const logged: Array<Record<string, unknown>> = [];
    const logger = createLogger('info', 'gateway', {
      write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>),
    });
    const t = await startTestGateway({
      gateway: { tracing: options(`http://127.0.0.1:${await freePort()}/v1/traces`), logger },
    });
    try {
      const rollout = await t.rollout();
      for (let i = 0; i < 5; i++) {
        const reply = await rollout.client.chat.completions.create({
          model: 'production',
          messages: [{ role: 'user', content: `hello ${i}` }],
        });
        expect(reply.choices[0]?.message.content).toBe(`Echo: hello ${i}`);
      }
      const tracing = t.gateway.tracing!;
      await until(() => tracing.stats().dropped === 5);
      expect(tracing.stats()).toEqual({ exported: 0, dropped: 5, queued: 0 });
      const warnings = logged.filter((l) => String(l.msg).startsWith('trace export is failing'));
      expect(warnings).toHaveLength(1);
      expect(String(warnings[0]!.reason)).toMatch(/ECONNREFUSED|connect/);
    } finally {
      await t.close();
    }
  }, 30_000);

  it('keeps at most maxQueueSize spans while an export hangs, drops the rest, and counts the hung ones dropped when the backend goes away', async () => {
    const backend = await silentServer();
    const t = await startTestGateway({
      gateway: { tracing: options(backend.url, { maxQueueSize: 2, exportTimeoutMs: 5000 }) },
    });
    try {
      const rollout = await t.rollout();
      for (let i = 0; i < 6; i++) {
        const reply = await rollout.client.chat.completions.create({
          model: 'production',
          messages: [{ role: 'user', content: `call ${i}` }],
        });
        expect(reply.choices[0]?.message.content).toBe(`Echo: call ${i}`);
      }
      const tracing = t.gateway.tracing!;
      // Whatever was sent waits on the silent backend; nothing past the queue's bound is kept.
      await until(() => tracing.stats().dropped >= 4);
      expect(tracing.stats()).toMatchObject({ exported: 0, queued: 2, dropped: 4 });
      await until(() => backend.received() >= 1);
    } finally {
      await backend.close();
      await t.close();
    }
    expect(t.gateway.tracing!.stats()).toMatchObject({ exported: 0, queued: 0, dropped: 6 });
  }, 30_000);
});
