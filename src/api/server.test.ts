import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { validateConfig } from '../config/load.js';
import { sha256Hex } from '../gateway/keys.js';
import { buildApi, startApi } from './server.js';

/**
 * The API's request handling without Temporal: the schedule routes reach only this stand-in for
 * the client's schedule handles, which records what it was asked.
 */
const KEY = 'test-key';
const asked: string[] = [];
const client = {
  schedule: {
    getHandle: (id: string) => ({
      pause: async (note?: string) => void asked.push(`pause ${id} ${note ?? '-'}`),
      unpause: async (note?: string) => void asked.push(`unpause ${id} ${note ?? '-'}`),
    }),
  },
} as unknown as Client;
let app: FastifyInstance;

beforeAll(() => {
  app = buildApi({ config: validateConfig({}, 'test'), client, keyHash: sha256Hex(KEY) });
});
afterAll(() => app.close());

const inject = async (method: 'GET' | 'POST', url: string, options: { body?: string; key?: string | null } = {}) => {
  const key = options.key === undefined ? KEY : options.key;
  const res = await app.inject({
    method,
    url,
    headers: {
      ...(key !== null && { authorization: `Bearer ${key}` }),
      ...(options.body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(options.body !== undefined && { payload: options.body }),
  });
  return { status: res.statusCode, body: res.json<Record<string, any>>() };
};

describe('the HTTP API without Temporal', () => {
  it('asks for the key before it looks at the request', async () => {
    expect(await inject('POST', '/api/runs', { body: '{"iterations": 0}', key: null })).toMatchObject({
      status: 401,
      body: { error: { code: 'missing_key' } },
    });
    expect(await inject('GET', '/api/runs?limit=0', { key: 'wrong' })).toMatchObject({
      status: 403,
      body: { error: { code: 'forbidden' } },
    });
  });

  it('names where each problem of a refused request is', async () => {
    expect(await inject('GET', '/api/runs?limit=0')).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid_request', message: expect.stringMatching(/^query\.limit: /) } },
    });
    expect(await inject('POST', '/api/schedules/weekly/pause', { body: '{"bogus": 1}' })).toMatchObject({
      status: 400,
      body: { error: { message: expect.stringContaining('body: Unrecognized key: "bogus"') } },
    });
    expect(await inject('POST', '/api/releases', { body: '{}' })).toMatchObject({
      status: 400,
      body: { error: { message: expect.stringMatching(/^body\.candidate: /) } },
    });
  });

  it('takes an optional body left out, sent as null, or sent', async () => {
    asked.length = 0;
    expect(await inject('POST', '/api/schedules/weekly/pause')).toMatchObject({ status: 202, body: { ok: true } });
    expect(await inject('POST', '/api/schedules/weekly/unpause', { body: 'null' })).toMatchObject({
      status: 202,
      body: { ok: true },
    });
    expect(await inject('POST', '/api/schedules/weekly/pause', { body: '{"note": "freeze"}' })).toMatchObject({
      status: 202,
    });
    expect(asked).toEqual(['pause weekly -', 'unpause weekly -', 'pause weekly freeze']);
  });

  it('documents each /api/ route with its key, its answers and whether its body may be left out', async () => {
    const { status, body: doc } = await inject('GET', '/openapi.json', { key: null });
    expect(status).toBe(200);
    const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({ path, method, op })),
    );
    expect(operations.length).toBe(27);
    for (const { path, op } of operations) {
      expect(path).toMatch(/^\/api\//);
      expect(op.security).toEqual([{ bearer: [] }]);
      expect(op.responses.default.content['application/json'].schema.required).toEqual(['error']);
    }
    expect(doc.paths['/api/schedules/{scheduleId}/pause'].post.requestBody.required).toBe(false);
    expect(doc.paths['/api/releases'].post.requestBody.required).toBe(true);
    expect(
      doc.paths['/api/runs'].get.responses['200'].content['application/json'].schema.properties.items.items.properties
        .startTime,
    ).toMatchObject({ type: 'string', format: 'date-time' });
  });

  it('answers unknown routes and /healthz outside the document', async () => {
    expect(await inject('GET', '/api/nothing')).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    expect(await inject('GET', '/healthz', { key: null })).toEqual({ status: 200, body: { ok: true } });
  });
});

describe('the HTTP API shutting down', () => {
  it('does not wait on a client that stalls mid-request', { timeout: 20_000 }, async () => {
    const api = await startApi(
      { config: validateConfig({}, 'test'), client, keyHash: sha256Hex(KEY) },
      { host: '127.0.0.1', port: 0 },
    );
    const { port } = new URL(api.url);
    const stalled = net.connect(Number(port), '127.0.0.1');
    await new Promise((resolve) => stalled.once('connect', resolve));
    // Headers never finished: Node counts the connection busy, and its own timeout is a minute away.
    stalled.write('GET /healthz HTTP/1.1\r\nHost: rein\r\n');
    await new Promise((resolve) => setTimeout(resolve, 100));
    await api.close();
    await new Promise((resolve) => (stalled.destroyed ? resolve(null) : stalled.once('close', resolve)));
  });
});
