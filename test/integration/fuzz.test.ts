import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Connection } from '@temporalio/client';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as apiSchemas from '../../src/api/schemas.js';
import { startApi, type ApiServer } from '../../src/api/server.js';
import { validateConfig } from '../../src/config/load.js';
import { adminKeyFile } from '../../src/gateway/from-config.js';
import { sha256Hex } from '../../src/gateway/keys.js';
import { DEFAULT_REDACTION_RULES } from '../../src/gateway/redact.js';
import { startGateway, type Gateway } from '../../src/gateway/server.js';
import { defaultModelConfig, saveCheckpoint } from '../../src/policy/checkpoint.js';
import { Qwen3Model, readyBackend } from '../../src/policy/model.js';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';
import { openTraceStore } from '../../src/store/open.js';
import type { TraceStore } from '../../src/store/trace-store.js';
import { ADMIN_KEY, routingFor, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { suiteStoreBackend, testStoreLocation } from '../helpers/postgres.js';
import { testClient } from '../helpers/temporal.js';

/**
 * Bounded fuzzing of what harnesses, callers and backends send: whatever arrives, Rein answers
 * without a 5xx of its own (only the documented upstream classes, 502/504, when the backend is
 * at fault), without hanging, and leaves no journal row in flight once its response has ended.
 */
const RUNS = 40;
/** A request that takes longer than this has hung (every answer here is immediate). */
const HANG_MS = 15_000;
const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-fuzz-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function send(
  url: string,
  init: { method: string; body?: string | Uint8Array; headers?: Record<string, string> },
) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(HANG_MS) });
  const text = await res.text();
  return { status: res.status, text };
}
const bearer = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

/**
 * Bodies a harness or caller might send: any JSON, broken JSON, deep nesting, and valid requests with fields of any
 * type.
 */
function bodies(valid: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<string> {
  const anyValue = fc.oneof(
    fc.jsonValue(),
    fc.constantFrom(null, -1, 0, 1.5, 1e308, '', 'yes', [], {}, [null], { __proto__: 1 }),
  );
  const mutated = fc
    .tuple(
      valid,
      fc.dictionary(
        fc.constantFrom(
          'model',
          'messages',
          'prompt',
          'stream',
          'n',
          'max_tokens',
          'logprobs',
          'top_logprobs',
          'stop',
          'tools',
          'stream_options',
          'return_token_ids',
          'seed',
          'temperature',
          'metadata',
          'data',
          'status',
          'type',
          'name',
        ),
        anyValue,
      ),
    )
    .map(([base, changes]) => ({ ...base, ...changes }));
  return fc.oneof(
    mutated.map((v) => JSON.stringify(v)),
    valid.map((v) => JSON.stringify(v)),
    fc.jsonValue().map((v) => JSON.stringify(v)),
    fc.string({ unit: 'binary' }),
    fc.integer({ min: 1, max: 20_000 }).map((depth) => `${'['.repeat(depth)}${']'.repeat(depth)}`),
    fc.constantFrom(
      '{"__proto__": {"x": 1}, "model": "production", "messages": []}',
      '{"model": "production", "messages": [{"role": "user", "content": "\\ud800"}]}',
      '{',
      '',
      'null',
    ),
  );
}

/** The chat and completions requests a harness sends, with small sizes so the backend answers at once. */
const chatRequest = fc.record({
  model: fc.constantFrom('production', 'policy-v1', 'no-such-model'),
  messages: fc.array(
    fc.record({ role: fc.constantFrom('user', 'system', 'assistant'), content: fc.string({ maxLength: 30 }) }),
    { minLength: 1, maxLength: 3 },
  ),
  stream: fc.boolean(),
  n: fc.integer({ min: 1, max: 3 }),
  max_tokens: fc.integer({ min: 1, max: 16 }),
});
const completionRequest = fc.record({
  model: fc.constantFrom('production', 'policy-v1'),
  prompt: fc.string({ maxLength: 40 }),
  stream: fc.boolean(),
  max_tokens: fc.integer({ min: 1, max: 16 }),
});

describe('fuzz: the gateway, from the harness side and from the admin side', () => {
  let t: TestGateway;
  let rollout: { id: string; key: string; baseUrl: string };
  beforeAll(async () => {
    t = await startTestGateway();
    rollout = await t.rollout({ taskId: 'fuzz' });
  });
  afterAll(() => t.close());

  it('answers any model call body without a 5xx, and journals every call as finished', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('chat/completions', 'completions', 'responses'),
        bodies(fc.oneof(chatRequest, completionRequest)),
        async (route, body) => {
          const { status, text } = await send(`${rollout.baseUrl}/${route}`, {
            method: 'POST',
            headers: bearer(rollout.key),
            body,
          });
          expect(status, text).toBeLessThan(500);
        },
      ),
      { numRuns: RUNS * 3 },
    );
    const calls = await t.store.listCalls(rollout.id);
    expect(calls.filter((c) => c.status === 'in_flight')).toEqual([]);
  });

  it('answers any admin request without a 5xx', async () => {
    const names = fc.oneof(
      fc.string({ maxLength: 20 }),
      fc.constantFrom('__proto__', 'constructor', 'v\r\nX: 1', 'vé', 'a'.repeat(300), '%', '..'),
    );
    const requests = fc.oneof(
      bodies(fc.record({ id: fc.string({ maxLength: 140 }), taskId: fc.string(), metadata: fc.jsonValue() })).map(
        (body) => ({ method: 'POST', path: '/api/rollouts', body }),
      ),
      fc
        .tuple(
          names,
          bodies(fc.record({ backend: fc.constantFrom('toy', '__proto__', 'constructor'), model: fc.string() })),
        )
        .map(([name, body]) => ({ method: 'PUT', path: `/api/policies/${encodeURIComponent(name)}`, body })),
      fc
        .tuple(names, bodies(fc.record({ version: fc.constantFrom('policy-v1', '__proto__', 'nope') })))
        .map(([name, body]) => ({ method: 'PUT', path: `/api/aliases/${encodeURIComponent(name)}`, body })),
      bodies(
        fc.record({
          status: fc.constantFrom('running', 'succeeded', 'failed', 'bogus'),
          reason: fc.string(),
          evidence: fc.jsonValue(),
        }),
      ).map((body) => ({ method: 'POST', path: `/api/rollouts/${rollout.id}/status`, body })),
      fc
        .tuple(names, fc.constantFrom('status', 'events', 'attempts', 'reopen', 'calls', 'verifier-key'))
        .map(([name, what]) => ({
          method: what === 'calls' ? 'GET' : 'POST',
          path: `/api/rollouts/${encodeURIComponent(name)}/${what}`,
          body: undefined,
        })),
    );
    await fc.assert(
      fc.asyncProperty(requests, async ({ method, path: route, body }) => {
        const { status, text } = await send(`${t.gateway.url}${route}`, {
          method,
          headers: bearer(ADMIN_KEY),
          ...(body !== undefined && { body }),
        });
        expect(status, `${method} ${route}: ${text}`).toBeLessThan(500);
      }),
      { numRuns: RUNS * 2 },
    );
  });

  it('answers any event a harness appends without a 5xx', async () => {
    const events = bodies(
      fc.record({
        type: fc.constantFrom('span', 'custom', 'reward', 'bogus'),
        name: fc.string(),
        value: fc.oneof(fc.double(), fc.string()),
        data: fc.jsonValue(),
        input: fc.jsonValue(),
        output: fc.jsonValue(),
      }),
    );
    await fc.assert(
      fc.asyncProperty(events, async (body) => {
        const { status, text } = await send(`${t.gateway.url}/api/rollouts/${rollout.id}/events`, {
          method: 'POST',
          headers: bearer(rollout.key),
          body,
        });
        expect(status, text).toBeLessThan(500);
      }),
      { numRuns: RUNS },
    );
  });
});

describe('fuzz: the HTTP API (rein api, rein dev), every route in its OpenAPI document', () => {
  const API_KEY = 'fuzz-api-key';
  let t: TestGateway;
  let api: ApiServer;
  let connection: Connection;
  let routes: Array<{ method: string; template: string }>;
  beforeAll(async () => {
    t = await startTestGateway();
    await t.rollout({ taskId: 'api-fuzz' });
    const base = validateConfig({}, 'test');
    const dataDir = mkdtempSync(path.join(scratch, 'api-'));
    // The console's rollout routes read the test gateway, with its admin key.
    const gateway = {
      ...base.gateway,
      host: '127.0.0.1',
      port: Number(new URL(t.gateway.url).port),
      secretFile: path.join(dataDir, 'gateway-secret'),
    };
    mkdirSync(path.dirname(adminKeyFile(gateway)), { recursive: true });
    writeFileSync(adminKeyFile(gateway), ADMIN_KEY);
    const temporal = await testClient();
    connection = temporal.connection;
    api = await startApi(
      { config: { ...base, dataDir, gateway }, client: temporal.client, keyHash: sha256Hex(API_KEY) },
      { host: '127.0.0.1', port: 0 },
    );
    const document = (await (await fetch(`${api.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    routes = Object.entries(document.paths).flatMap(([template, methods]) =>
      Object.keys(methods).map((method) => ({ method: method.toUpperCase(), template })),
    );
  });
  afterAll(async () => {
    await api?.close();
    await connection?.close();
    await t?.close();
  });

  // Bodies that would start real work on the shared Temporal server (a run, a release, a schedule) are not sent.
  const startsWork: Record<string, { safeParse(v: unknown): { success: boolean } }> = {
    'POST /api/runs': apiSchemas.startRunBody,
    'POST /api/releases': apiSchemas.releaseBody,
    'POST /api/schedules': apiSchemas.createScheduleBody,
  };
  const segment = fc.oneof(
    fc.string({ maxLength: 30 }),
    fc.constantFrom('__proto__', 'constructor', 'production', 'api-fuzz', 'v\r\nX: 1', 'é', 'a'.repeat(300), '..', '%'),
  );

  it('answers any request to any route in its own error shape, without a 5xx or a hang', async () => {
    expect(routes.length).toBeGreaterThan(15);
    const requests = fc.record({
      route: fc.constantFrom(...routes),
      params: fc.array(segment, { minLength: 4, maxLength: 4 }),
      query: fc.dictionary(
        fc.constantFrom('limit', 'runId', 'after', 'attempt', 'x'),
        fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom('-1', '0', '1e9', '[]')),
      ),
      body: bodies(
        fc.record({
          runId: fc.string({ maxLength: 70 }),
          iterations: fc.integer(),
          version: fc.string(),
          reason: fc.string(),
          cron: fc.string(),
        }),
      ),
    });
    await fc.assert(
      fc.asyncProperty(requests, async ({ route, params, query, body }) => {
        let i = 0;
        const url = `${route.template.replace(/\{[^}]+\}/g, () => encodeURIComponent(params[i++] ?? ''))}?${new URLSearchParams(query)}`;
        const withBody = route.method !== 'GET' && route.method !== 'DELETE';
        const parsed = (() => {
          try {
            return JSON.parse(body) as unknown;
          } catch {
            return undefined;
          }
        })();
        if (withBody && startsWork[`${route.method} ${route.template}`]?.safeParse(parsed).success) return;
        const { status, text } = await send(`${api.url}${url}`, {
          method: route.method,
          headers: { authorization: `Bearer ${API_KEY}`, ...(withBody && { 'content-type': 'application/json' }) },
          ...(withBody && { body }),
        });
        expect(status, `${route.method} ${url}: ${text}`).toBeLessThan(500);
        if (status >= 400)
          expect(JSON.parse(text), text).toMatchObject({
            error: { code: expect.any(String), message: expect.any(String) },
          });
      }),
      { numRuns: RUNS * 3 },
    );
  });
});

describe('fuzz: replies of a misbehaving backend', () => {
  let reply: (req: http.IncomingMessage, res: http.ServerResponse) => void = (_req, res) => res.end();
  let backend: http.Server;
  let gateway: Gateway;
  let store: TraceStore;
  beforeAll(async () => {
    backend = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => reply(req, res));
    });
    await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
    store = await openTraceStore(
      await testStoreLocation(suiteStoreBackend, scratch),
      path.join(scratch, 'upstream-traces.sqlite'),
    );
    gateway = await startGateway(
      {
        store,
        routing: routingFor(`http://127.0.0.1:${(backend.address() as AddressInfo).port}/v1`),
        secret: randomBytes(32),
        adminKeyHash: sha256Hex(ADMIN_KEY),
        redaction: DEFAULT_REDACTION_RULES,
      },
      { host: '127.0.0.1', port: 0 },
    );
  });
  afterAll(async () => {
    await gateway.close();
    backend.closeAllConnections();
    await new Promise((resolve) => backend.close(resolve));
    await store.close();
  });

  const garbage = fc.oneof(
    fc.jsonValue(),
    fc.constantFrom(null, 7, 'x', [], -1, 4294967297, 7.9, 1e40, 'nan', [null], { __proto__: 1 }),
  );
  const choice = fc.oneof(
    fc.record(
      {
        index: fc.oneof(fc.nat(3), garbage),
        message: fc.oneof(
          fc.record({ role: fc.constant('assistant'), content: fc.oneof(fc.string(), garbage) }),
          garbage,
        ),
        finish_reason: fc.oneof(fc.constantFrom('stop', 'length'), garbage),
        token_ids: fc.oneof(fc.array(fc.nat(1000)), fc.array(garbage), garbage),
        logprobs: fc.oneof(
          fc.record({
            content: fc.oneof(
              fc.array(fc.record({ token: fc.string(), logprob: fc.oneof(fc.double({ max: 0 }), garbage) })),
              fc.array(garbage),
              garbage,
            ),
          }),
          garbage,
        ),
      },
      { requiredKeys: [] },
    ),
    garbage,
  );
  const response = fc.record(
    {
      id: fc.string(),
      object: fc.constant('chat.completion'),
      choices: fc.oneof(fc.array(choice, { maxLength: 3 }), garbage),
      prompt_token_ids: fc.oneof(fc.array(fc.nat(1000)), garbage),
      usage: garbage,
    },
    { requiredKeys: [] },
  );
  const chunk = fc.record(
    {
      id: fc.string(),
      object: fc.constant('chat.completion.chunk'),
      choices: fc.oneof(
        fc.array(
          fc.record(
            {
              index: fc.oneof(fc.nat(2), garbage),
              delta: fc.oneof(fc.record({ content: fc.oneof(fc.string(), garbage) }), garbage),
              token_ids: fc.oneof(fc.array(fc.nat(1000)), garbage),
              finish_reason: fc.oneof(fc.constantFrom('stop', null), garbage),
            },
            { requiredKeys: [] },
          ),
          { maxLength: 2 },
        ),
        garbage,
      ),
    },
    { requiredKeys: [] },
  );
  const replies = fc.oneof(
    response.map((body) => ({ stream: false, text: JSON.stringify(body) })),
    fc.jsonValue().map((body) => ({ stream: false, text: JSON.stringify(body) })),
    fc
      .integer({ min: 1, max: 100_000 })
      .map((depth) => ({ stream: false, text: `{"choices":${'['.repeat(depth)}${']'.repeat(depth)}}` })),
    fc
      .tuple(
        fc.array(
          fc.oneof(
            chunk.map((c) => JSON.stringify(c)),
            fc.jsonValue().map((v) => JSON.stringify(v)),
            fc.string(),
          ),
        ),
        fc.boolean(),
      )
      .map(([chunks, done]) => ({
        stream: true,
        text: `${chunks.map((c) => `data: ${c.replaceAll('\n', ' ')}\n\n`).join('')}${done ? 'data: [DONE]\n\n' : ''}`,
      })),
  );

  it('answers the harness 200 or a documented upstream error, and journals the call as finished', async () => {
    const harness = await (async () => {
      const created = await send(`${gateway.url}/api/rollouts`, {
        method: 'POST',
        headers: bearer(ADMIN_KEY),
        body: JSON.stringify({ taskId: 'upstream-fuzz' }),
      });
      return JSON.parse(created.text) as { rollout: { id: string }; key: string; baseUrl: string };
    })();
    await fc.assert(
      fc.asyncProperty(replies, async ({ stream, text }) => {
        reply = (_req, res) => {
          res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json' });
          res.end(text);
        };
        const { status, text: answer } = await send(`${harness.baseUrl}/chat/completions`, {
          method: 'POST',
          headers: bearer(harness.key),
          body: JSON.stringify({ model: 'production', stream, messages: [{ role: 'user', content: 'hi' }] }),
        }).catch((err: Error) => ({ status: 0, text: String(err) }));
        // A stream the gateway ends early is cut (the harness sees a broken stream, status 200 already sent).
        expect([200, 502, 0], answer).toContain(status);
      }),
      { numRuns: RUNS * 2 },
    );
    const calls = await store.listCalls(harness.rollout.id);
    expect(calls.filter((c) => c.status === 'in_flight')).toEqual([]);
    for (const call of calls.filter((c) => c.status === 'ok')) {
      for (const ids of [call.promptIds ?? [], ...(call.choices ?? []).map((c) => c.completionIds ?? [])])
        expect(ids.every((id) => Number.isSafeInteger(id) && id >= 0 && id < 2 ** 32)).toBe(true);
      for (const c of call.choices ?? [])
        expect((c.logprobs ?? []).every((lp) => Number.isFinite(lp) && lp <= 0)).toBe(true);
    }
  });
});

describe('fuzz: the embedded policy server', () => {
  let server: PolicyServer;
  beforeAll(async () => {
    await readyBackend();
    const model = Qwen3Model.init(
      defaultModelConfig({
        maxPositions: 64,
        hiddenSize: 16,
        numHeads: 2,
        numKvHeads: 1,
        headDim: 8,
        intermediateSize: 32,
        numLayers: 1,
      }),
      1,
    );
    saveCheckpoint(path.join(scratch, 'tiny'), model);
    model.dispose();
    server = await startPolicyServer({
      host: '127.0.0.1',
      port: 0,
      models: { 'policy-v1': path.join(scratch, 'tiny') },
      adminKey: 'fuzz-admin',
    });
  });
  afterAll(() => server.close());

  it('answers any body without a 5xx or a hang', async () => {
    const chat = fc.record({
      model: fc.constantFrom('policy-v1', 'nope'),
      messages: fc.array(
        fc.record({
          role: fc.constantFrom('user', 'system', 'assistant', 'tool'),
          content: fc.string({ maxLength: 30 }),
        }),
        { maxLength: 3 },
      ),
      stream: fc.boolean(),
      n: fc.integer({ min: 1, max: 2 }),
      max_tokens: fc.integer({ min: 1, max: 8 }),
    });
    const completion = fc.record({
      model: fc.constantFrom('policy-v1'),
      prompt: fc.oneof(fc.string({ maxLength: 30 }), fc.array(fc.integer({ min: -5, max: 70_000 }), { maxLength: 8 })),
      stream: fc.boolean(),
      max_tokens: fc.integer({ min: 1, max: 8 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/v1/chat/completions', '/v1/completions', '/v1/load_lora_adapter', '/v1/unload_lora_adapter'),
        bodies(fc.oneof(chat, completion)),
        async (route, body) => {
          const { status, text } = await send(`${server.url.replace(/\/v1$/, '')}${route}`, {
            method: 'POST',
            headers: bearer('fuzz-admin'),
            body,
          });
          expect(status, text).toBeLessThan(500);
        },
      ),
      { numRuns: RUNS },
    );
  });
});
