import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type ApiServer } from '../../src/api/server.js';
import { validateConfig } from '../../src/config/load.js';
import { sha256Hex } from '../../src/gateway/keys.js';
import { testClient } from '../helpers/temporal.js';

// Whatever a caller sends, Rein's API answers with its own error shape and a 4xx that says what
// was wrong, and goes on serving: never a 500 (or the framework's shape) for the caller's mistake.

const KEY = 'api-hostile-test-key';
let api: ApiServer;
let connection: Connection;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'rein-api-hostile-'));
  const config = { ...validateConfig({}, 'test'), dataDir };
  const temporal = await testClient();
  connection = temporal.connection;
  api = await startApi({ config, client: temporal.client, keyHash: sha256Hex(KEY) }, { host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await api?.close();
  await connection?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function call(method: string, route: string, body?: string) {
  const res = await fetch(`${api.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    body,
  });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } };
}

/** A request fetch would not send (a raw, over-long request line), answered by Node's HTTP parser. */
function rawGet(route: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${api.url}${route}`, { headers: { authorization: `Bearer ${KEY}` } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;

describe('the API under hostile input', () => {
  it('a deeply nested body is a 400 naming the depth', async () => {
    for (const route of ['/api/runs', '/api/schedules', '/api/production/rollback']) {
      const res = await call('POST', route, `{"note": ${deep(5000)}}`);
      expect(res, route).toEqual({
        status: 400,
        body: { error: { code: 'invalid_request', message: expect.stringMatching(/nested deeper than \d+ levels/) } },
      });
    }
    expect((await call('GET', '/api/policies')).status).toBe(200);
  });

  it("a body over the limit is a 413 in Rein's shape", async () => {
    const res = await call('POST', '/api/runs', JSON.stringify({ runId: 'x'.repeat(2 * 1024 * 1024) }));
    expect(res).toEqual({
      status: 413,
      body: { error: { code: 'body_too_large', message: expect.stringMatching(/1 MiB/) } },
    });
  });

  it("an over-long path parameter is a 414, a malformed URL a 400, both in Rein's shape", async () => {
    expect(await call('GET', `/api/runs/${'r'.repeat(500)}`)).toEqual({
      status: 414,
      body: { error: { code: 'uri_too_long', message: expect.any(String) } },
    });
    expect(await call('GET', '/api/runs/%E0%A4%A')).toEqual({
      status: 400,
      body: { error: { code: 'invalid_request', message: expect.stringMatching(/percent-encoding/) } },
    });
  });

  it("a request line over Node's limit is a 431 in Rein's shape", async () => {
    const res = await rawGet(`/api/runs?limit=${'9'.repeat(64 * 1024)}`);
    expect(res.status).toBe(431);
    expect(JSON.parse(res.body)).toEqual({
      error: { code: 'request_too_large', message: expect.stringMatching(/shorter URL/) },
    });
  });

  it("a body that is not JSON, or JSON of the wrong content type, is a 4xx in Rein's shape", async () => {
    expect(await call('POST', '/api/runs', '{"runId": ')).toEqual({
      status: 400,
      body: { error: { code: 'invalid_request', message: expect.stringMatching(/JSON/) } },
    });
    // JSON with a key named __proto__ is refused on purpose, and said so (not as if it were not JSON).
    expect(await call('POST', '/api/runs', '{"runId": "x", "__proto__": {"iterations": 1}}')).toEqual({
      status: 400,
      body: {
        error: { code: 'forbidden_key', message: expect.stringMatching(/^the JSON body has a key named __proto__/) },
      },
    });
    const res = await fetch(`${api.url}/api/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/xml' },
      body: '<runId>x</runId>',
    });
    expect({ status: res.status, body: await res.json() }).toEqual({
      status: 415,
      body: { error: { code: 'unsupported_media_type', message: expect.stringMatching(/application\/json/) } },
    });
  });
});
