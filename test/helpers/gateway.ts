import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { sha256Hex } from '../../src/gateway/keys.js';
import { DEFAULT_REDACTION_RULES } from '../../src/gateway/redact.js';
import type { RoutingTable } from '../../src/gateway/routing.js';
import { startGateway, type Gateway, type GatewayOptions } from '../../src/gateway/server.js';
import { openTraceStore } from '../../src/store/open.js';
import type { TraceStore } from '../../src/store/trace-store.js';
import { suiteStoreBackend, testStoreLocation } from './postgres.js';
import { MODEL, startVllmLikeServer, type VllmLikeServer } from './vllm-like-server.js';

export const ADMIN_KEY = 'admin-key-for-tests';

export interface TestGateway {
  gateway: Gateway;
  backend: VllmLikeServer;
  store: TraceStore;
  admin(
    method: string,
    path: string,
    body?: unknown,
    key?: string,
  ): Promise<{ status: number; body: any; headers: Headers }>;
  /** Creates a rollout and returns an `openai` client configured as a harness would be. */
  rollout(
    input?: Record<string, unknown>,
  ): Promise<{ id: string; key: string; client: OpenAI; baseUrl: string; pathBaseUrl: string }>;
  close(): Promise<void>;
}

export function routingFor(backendUrl: string, extraModels: string[] = []): RoutingTable {
  return {
    backends: { toy: { endpoints: [backendUrl], tokenIds: true, logprobs: true } },
    policies: {
      'policy-v1': { backend: 'toy', model: MODEL },
      ...Object.fromEntries(extraModels.map((m) => [m, { backend: 'toy', model: m }])),
    },
    aliases: { production: 'policy-v1' },
  };
}

/** A Rein config file's content that runs `rein gateway` in front of a vLLM-like backend. */
export function gatewayConfigFile(backendUrl: string, port: number): Record<string, unknown> {
  return {
    dataDir: './data',
    log: { level: 'warn' },
    gateway: {
      host: '127.0.0.1',
      port,
      backends: { toy: { endpoints: [backendUrl] } },
      policies: { 'policy-v1': { backend: 'toy', model: MODEL } },
      aliases: { production: 'policy-v1' },
    },
  };
}

/** The stand-in backend's scripted faults, each served as its own policy version. */
export const FAULT_MODELS = ['fault:500', 'fault:garbage', 'fault:reset', 'fault:cut', 'fault:slow:2500', 'fault:hold'];

export async function startTestGateway(
  options: { backend?: { chunkDelayMs?: number; chunkSize?: number }; gateway?: Partial<GatewayOptions> } = {},
): Promise<TestGateway> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-gateway-'));
  const backend = await startVllmLikeServer(options.backend);
  const store = await openTraceStore(await testStoreLocation(suiteStoreBackend, dir), path.join(dir, 'traces.sqlite'));
  const gateway = await startGateway(
    {
      store,
      routing: routingFor(backend.url, FAULT_MODELS),
      secret: randomBytes(32),
      adminKeyHash: sha256Hex(ADMIN_KEY),
      redaction: DEFAULT_REDACTION_RULES,
      ...options.gateway,
    },
    { host: '127.0.0.1', port: 0 },
  );
  const admin: TestGateway['admin'] = async (method, route, body, key = ADMIN_KEY) => {
    const res = await fetch(`${gateway.url}${route}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
  };
  return {
    gateway,
    backend,
    store,
    admin,
    async rollout(input = {}) {
      const created = await admin('POST', '/api/rollouts', input);
      if (created.status >= 300) throw new Error(`create rollout: ${JSON.stringify(created.body)}`);
      const { rollout, key, baseUrl, pathBaseUrl } = created.body;
      return {
        id: rollout.id,
        key,
        baseUrl,
        pathBaseUrl,
        client: new OpenAI({ apiKey: key, baseURL: baseUrl, maxRetries: 0 }),
      };
    },
    async close() {
      await gateway.close();
      await backend.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
