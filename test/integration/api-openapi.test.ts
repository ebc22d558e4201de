import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer } from '../../src/api/server.js';
import { loadConfig } from '../../src/config/load.js';
import { startApiStack, type ApiStack } from '../helpers/api-stack.js';
import { writeExampleConfig } from '../helpers/example-config.js';
import { freshNamespace } from '../helpers/temporal.js';

/**
 * The contract between the API and its document: GET /openapi.json (what `npm run docs` and the
 * console's types come from) names every route the server has, and every real answer of every
 * route, on a real stack after a real run, is valid against the document's schema for it
 * (checked by ajv, a JSON Schema validator of its own, not by the zod schemas it was made from).
 */

interface Operation {
  responses: Record<string, { content?: { 'application/json'?: { schema: object } } }>;
}
interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-api-openapi-'));
let stack: ApiStack;
let api: ApiServer;
let document: OpenApiDocument;
const ajv = new Ajv2020({ strict: true, allErrors: true });
// The one format the document uses; ajv refuses a schema with a format it does not know.
ajv.addFormat(
  'date-time',
  (text: string) =>
    /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(text) && !Number.isNaN(Date.parse(text)),
);
const validators = new Map<string, ValidateFunction>();
/** `GET /api/runs/{runId}` and so on: each operation that gave a 2xx answer, checked against the document. */
const answered = new Set<string>();

beforeAll(async () => {
  const namespace = await freshNamespace();
  const { file } = await writeExampleConfig(
    dir,
    { iterations: 1, tasksPerIteration: 2, samplesPerTask: 2, heldoutLimit: 2 },
    { samples: { zeroVarianceGroups: 'keep' } },
    { namespace },
  );
  stack = await startApiStack(loadConfig({ file, env: {} }).config);
  api = stack.api;
  const res = await fetch(`${api.url}/openapi.json`);
  expect(res.status).toBe(200);
  document = (await res.json()) as OpenApiDocument;
}, 120_000);
afterAll(async () => {
  await stack?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The schema the document gives for this answer: its status's, else the error answer every route may give. */
function validatorFor(method: string, template: string, status: number): ValidateFunction {
  const key = `${method} ${template} ${status}`;
  const cached = validators.get(key);
  if (cached) return cached;
  const operation = document.paths[template]?.[method.toLowerCase()];
  expect(operation, `${method} ${template} is not in /openapi.json`).toBeDefined();
  const answer = operation!.responses[String(status)] ?? operation!.responses.default;
  const schema = answer?.content?.['application/json']?.schema;
  expect(schema, `${method} ${template} documents no JSON answer for ${status}`).toBeDefined();
  const validate = ajv.compile(schema!);
  validators.set(key, validate);
  return validate;
}

/**
 * Calls one route, by its documented path template and the values of its parameters, and checks
 * the answer against the document before the test looks at it.
 */
async function call(
  method: string,
  template: string,
  options: { params?: Record<string, string>; query?: string; body?: unknown; key?: string | null } = {},
) {
  const url =
    template.replace(/\{(\w+)\}/g, (_all, name: string) =>
      encodeURIComponent(options.params?.[name] ?? `missing-${name}`),
    ) + (options.query ? `?${options.query}` : '');
  const key = options.key === undefined ? stack.key : options.key;
  const res = await fetch(`${api.url}${url}`, {
    method,
    headers: {
      ...(key !== null && { authorization: `Bearer ${key}` }),
      ...(options.body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(options.body !== undefined && { body: JSON.stringify(options.body) }),
  });
  const body = (await res.json()) as Record<string, any>;
  const validate = validatorFor(method, template, res.status);
  expect(
    validate(body),
    `${method} ${url} answered ${res.status} outside the document: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body).slice(0, 2000)}`,
  ).toBe(true);
  if (res.status >= 200 && res.status < 300) answered.add(`${method} ${template}`);
  return { status: res.status, body };
}

async function finished(runId: string): Promise<Record<string, any>> {
  for (;;) {
    const { body } = await call('GET', '/api/runs/{runId}', { params: { runId } });
    if (body.execution !== 'RUNNING') return body;
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * The routes the server has under /api/, from Fastify's own route tree (without the HEAD routes it adds for each GET).
 */
function servedRoutes(): string[] {
  const routes: string[] = [];
  const prefixes: string[] = [];
  for (const line of api.app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = /^([│ ]*)[├└]── (\S+)(?: \(([^)]+)\))?/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    prefixes.length = depth;
    const full = prefixes.join('') + match[2]!;
    prefixes.push(match[2]!);
    for (const method of match[3]?.split(', ') ?? [])
      if (method !== 'HEAD' && full.startsWith('/api/')) routes.push(`${method} ${full.replace(/:(\w+)/g, '{$1}')}`);
  }
  return routes.sort();
}

const documented = () =>
  Object.entries(document.paths)
    .flatMap(([template, operations]) => Object.keys(operations).map((method) => `${method.toUpperCase()} ${template}`))
    .sort();

describe('the OpenAPI document against the API that serves it', () => {
  it('is OpenAPI 3.1 and documents every /api/ route the server has, and no other', () => {
    expect(document.openapi).toBe('3.1.0');
    expect(documented().length).toBeGreaterThan(0);
    expect(servedRoutes()).toEqual(documented());
  });

  it('refusals are the documented error answer', async () => {
    expect((await call('GET', '/api/runs', { key: null })).status).toBe(401);
    expect((await call('GET', '/api/runs', { key: 'not-the-key' })).status).toBe(403);
    expect((await call('POST', '/api/runs', { body: { iterations: 0 } })).status).toBe(400);
    expect((await call('GET', '/api/runs/{runId}', { params: { runId: 'no-such-run' } })).status).toBe(404);
    expect((await call('GET', '/api/decisions/{decisionId}', { params: { decisionId: 'nope' } })).status).toBe(404);
    expect((await call('GET', '/api/rollouts/{rolloutId}', { params: { rolloutId: 'no-such-rollout' } })).status).toBe(
      404,
    );
    expect(
      (await call('DELETE', '/api/schedules/{scheduleId}', { params: { scheduleId: 'no-such-schedule' } })).status,
    ).toBe(404);
  });

  it("a run's answers, from its start to its end, are valid", { timeout: 240_000 }, async () => {
    expect((await call('POST', '/api/runs', { body: { runId: 'contract-1' } })).status).toBe(201);
    expect((await call('POST', '/api/runs/{runId}/pause', { params: { runId: 'contract-1' } })).status).toBe(202);
    expect((await call('POST', '/api/runs/{runId}/resume', { params: { runId: 'contract-1' } })).body).toMatchObject({
      action: 'signalled',
    });
    expect(await finished('contract-1')).toMatchObject({ execution: 'COMPLETED', status: { state: 'finished' } });
    // A second run (once the first is done: two runs may not gate into one production at once),
    // stopped, then ended by hand and continued: the other answer of resume.
    expect((await call('POST', '/api/runs', { body: { runId: 'contract-2' } })).status).toBe(201);
    expect((await call('POST', '/api/runs/{runId}/stop', { params: { runId: 'contract-2' } })).status).toBe(202);
    await stack.client.workflow.getHandle('contract-2').terminate('contract test: continued next');
    expect((await call('POST', '/api/runs/{runId}/resume', { params: { runId: 'contract-2' } })).body).toMatchObject({
      action: 'continued',
    });
    expect((await call('POST', '/api/runs/{runId}/cancel', { params: { runId: 'contract-2' } })).status).toBe(202);
    expect(await finished('contract-2')).toMatchObject({
      execution: 'CANCELLED',
      resumes: [expect.objectContaining({ previousStatus: 'TERMINATED' })],
    });
    expect((await call('GET', '/api/runs', { query: 'limit=50' })).body.items).toContainEqual(
      expect.objectContaining({ runId: 'contract-1' }),
    );
    const view = (await call('GET', '/api/runs/{runId}/iterations', { params: { runId: 'contract-1' } })).body;
    expect(view.iterations).toHaveLength(1);
    expect((await call('GET', '/api/runs', { query: 'execution=COMPLETED&search=contract' })).body).toMatchObject({
      items: [{ runId: 'contract-1' }],
      total: 1,
    });
    const config = (await call('GET', '/api/runs/{runId}/config', { params: { runId: 'contract-1' } })).body;
    expect(config.configHash).toMatch(/^[0-9a-f]{16}$/);
    const rollouts = (await call('GET', '/api/runs/{runId}/rollouts', { params: { runId: 'contract-1' } })).body;
    expect(rollouts.items.some((r: { kind: string }) => r.kind === 'train')).toBe(true);
    const trained = rollouts.items.find((r: { kind: string }) => r.kind === 'train');
    const tokens = await call('GET', '/api/runs/{runId}/iterations/{iteration}/tokens', {
      params: { runId: 'contract-1', iteration: '1' },
      query: `rollout=${encodeURIComponent(trained.rolloutId)}`,
    });
    expect(tokens.status).toBe(200);
    expect(tokens.body.sequences.length).toBeGreaterThan(0);
    const missing = await call('GET', '/api/runs/{runId}/iterations/{iteration}/tokens', {
      params: { runId: 'contract-1', iteration: '9' },
      query: `rollout=${encodeURIComponent(trained.rolloutId)}`,
    });
    expect(missing.status).toBe(404);
    const log = await call('GET', '/api/runs/{runId}/iterations/{iteration}/log', {
      params: { runId: 'contract-1', iteration: '1' },
    });
    expect(log.status).toBe(200);
    expect(
      (
        await call('GET', '/api/runs/{runId}/iterations/{iteration}/log', {
          params: { runId: 'contract-1', iteration: '9' },
        })
      ).status,
    ).toBe(404);
  });

  it("the policies', decisions', rollouts' and ledger's answers are valid", { timeout: 120_000 }, async () => {
    const report = (await call('GET', '/api/runs/{runId}', { params: { runId: 'contract-1' } })).body;
    const gate = report.status.iterations[0].gate as { decisionId: string; promoted: boolean };
    expect((await call('GET', '/api/policies', { query: 'runId=contract-1' })).body.items).toHaveLength(1);
    expect((await call('GET', '/api/decisions/{decisionId}', { params: { decisionId: gate.decisionId } })).status).toBe(
      200,
    );
    const pairs = (await call('GET', '/api/decisions/{decisionId}/pairs', { params: { decisionId: gate.decisionId } }))
      .body.items as Array<{ candidate: { rolloutId: string } }>;
    expect(pairs.length).toBeGreaterThan(0);
    const rollout = (
      await call('GET', '/api/rollouts/{rolloutId}', { params: { rolloutId: pairs[0]!.candidate.rolloutId } })
    ).body;
    expect(rollout.calls.length).toBeGreaterThan(0);
    expect((await call('GET', '/api/ledger', { query: 'runId=contract-1' })).body.items.length).toBeGreaterThan(0);
    if (!gate.promoted) {
      expect(
        (
          await call('POST', '/api/policies/{version}/promote', {
            params: { version: 'contract-1.v1' },
            body: { override: { reason: 'contract test' } },
          })
        ).status,
      ).toBe(200);
    }
    expect((await call('POST', '/api/production/rollback', { body: { reason: 'contract test' } })).status).toBe(200);
    expect((await call('GET', '/api/aliases')).body.aliases).toMatchObject({ production: 'v0' });
    expect((await call('POST', '/api/releases', { body: { candidate: 'contract-1.v1' } })).body).toMatchObject({
      decisionId: gate.decisionId,
    });
  });

  it("the schedules' answers are valid", { timeout: 60_000 }, async () => {
    const params = { scheduleId: 'contract-weekly' };
    expect(
      (
        await call('POST', '/api/schedules', {
          body: { scheduleId: 'contract-weekly', cron: '0 3 * * 1', paused: true, note: 'contract' },
        })
      ).status,
    ).toBe(201);
    // Schedules are listed from Temporal's visibility store, which may lag a moment behind the create.
    await expect
      .poll(async () => (await call('GET', '/api/schedules')).body.items, { timeout: 20_000 })
      .toContainEqual(expect.objectContaining(params));
    expect((await call('POST', '/api/schedules/{scheduleId}/unpause', { params })).status).toBe(202);
    expect((await call('POST', '/api/schedules/{scheduleId}/trigger', { params })).status).toBe(202);
    // The run the trigger started, once the schedule lists it: its times are answered too.
    let recentRuns: Array<{ runId: string }> = [];
    await expect
      .poll(
        async () =>
          (recentRuns =
            (
              (await call('GET', '/api/schedules')).body.items as Array<{
                scheduleId: string;
                recentRuns: Array<{ runId: string }>;
              }>
            ).find((s) => s.scheduleId === params.scheduleId)?.recentRuns ?? []),
        { timeout: 20_000 },
      )
      .toHaveLength(1);
    expect((await call('POST', '/api/schedules/{scheduleId}/pause', { params, body: { note: 'freeze' } })).status).toBe(
      202,
    );
    expect((await call('DELETE', '/api/schedules/{scheduleId}', { params })).status).toBe(200);
    await stack.client.workflow.getHandle(recentRuns[0]!.runId).terminate('contract test: started by a trigger');
  });

  it('every documented operation was answered with success and checked', () => {
    expect([...answered].sort()).toEqual(documented());
  });
});
