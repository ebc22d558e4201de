import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer } from '../../src/api/server.js';
import { loadConfig } from '../../src/config/load.js';
import { startApiStack } from '../helpers/api-stack.js';
import { freshNamespace, testClient } from '../helpers/temporal.js';
import { writeExampleConfig } from '../helpers/example-config.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-api-'));
let api: ApiServer;
let key: string;
const closers: Array<() => Promise<unknown> | unknown> = [];
// Its own namespace: the runs it lists are its own, not every other test file's.
let namespace: string;

beforeAll(async () => {
  namespace = await freshNamespace();
  const { file } = await writeExampleConfig(
    dir,
    { iterations: 1, tasksPerIteration: 2, samplesPerTask: 2, heldoutLimit: 2 },
    { samples: { zeroVarianceGroups: 'keep' } },
    { namespace },
  );
  const { config } = loadConfig({ file, env: {} });
  const stack = await startApiStack(config);
  closers.push(() => stack.close());
  ({ api, key } = stack);
});
afterAll(async () => {
  for (const close of closers.reverse()) await close();
  rmSync(dir, { recursive: true, force: true });
});

const call = async (method: string, url: string, body?: unknown, auth: string | null = key) => {
  const res = await fetch(`${api.url}${url}`, {
    method,
    headers: {
      ...(auth !== null && { authorization: `Bearer ${auth}` }),
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
};

describe('the HTTP API', () => {
  it('describes itself in an OpenAPI document generated from its schemas', async () => {
    const { status, body } = await call('GET', '/openapi.json', undefined, null);
    expect(status).toBe(200);
    expect(body.openapi).toBe('3.1.0');
    expect(Object.keys(body.paths).sort()).toEqual([
      '/api/aliases',
      '/api/decisions/{decisionId}',
      '/api/decisions/{decisionId}/pairs',
      '/api/ledger',
      '/api/policies',
      '/api/policies/{version}/promote',
      '/api/production/rollback',
      '/api/releases',
      '/api/rollouts/{rolloutId}',
      '/api/runs',
      '/api/runs/{runId}',
      '/api/runs/{runId}/cancel',
      '/api/runs/{runId}/config',
      '/api/runs/{runId}/iterations',
      '/api/runs/{runId}/iterations/{iteration}/log',
      '/api/runs/{runId}/iterations/{iteration}/tokens',
      '/api/runs/{runId}/pause',
      '/api/runs/{runId}/resume',
      '/api/runs/{runId}/rollouts',
      '/api/runs/{runId}/stop',
      '/api/schedules',
      '/api/schedules/{scheduleId}',
      '/api/schedules/{scheduleId}/pause',
      '/api/schedules/{scheduleId}/trigger',
      '/api/schedules/{scheduleId}/unpause',
    ]);
    const start = body.paths['/api/runs'].post;
    expect(start.requestBody.content['application/json'].schema.properties).toMatchObject({
      runId: { type: 'string' },
      iterations: expect.any(Object),
      samplesPerTask: { type: 'integer', minimum: 1 },
    });
    expect(start.responses['201'].content['application/json'].schema.required).toEqual(['runId', 'executionRunId']);
    expect(body.paths['/api/runs/{runId}'].get.parameters).toEqual([
      { name: 'runId', in: 'path', required: true, schema: { type: 'string', minLength: 1 } },
    ]);
  });

  it('refuses missing keys, wrong keys and bad input with the reason', async () => {
    expect(await call('GET', '/api/runs', undefined, null)).toMatchObject({
      status: 401,
      body: { error: { code: 'missing_key' } },
    });
    expect(await call('GET', '/api/runs', undefined, 'not-the-key')).toMatchObject({ status: 403 });
    expect(await call('POST', '/api/runs', { iterations: 0 })).toMatchObject({
      status: 400,
      body: { error: { message: expect.stringContaining('body.iterations: Too small') } },
    });
    expect(await call('POST', '/api/runs', { iterationz: 2 })).toMatchObject({
      status: 400,
      body: { error: { message: expect.stringContaining('Unrecognized key: "iterationz"') } },
    });
    expect(await call('POST', '/api/runs', '{"iterations": ')).toMatchObject({ status: 400 });
    expect(await call('GET', '/api/runs/no-such-run')).toMatchObject({
      status: 404,
      body: { error: { code: 'run_not_found', message: 'no run named no-such-run; `rein runs` lists the runs' } },
    });
    expect(await call('POST', '/api/schedules', { scheduleId: 'x', every: 'soon' })).toMatchObject({
      status: 400,
      body: { error: { message: expect.stringContaining('is not a duration') } },
    });
    expect(await call('GET', '/api/nothing')).toMatchObject({ status: 404 });
  });

  it(
    'starts a run, reports it until it finishes, lists it and its policy; the same run id again is a conflict',
    { timeout: 180_000 },
    async () => {
      const started = await call('POST', '/api/runs', { runId: 'api-1' });
      expect(started).toMatchObject({ status: 201, body: { runId: 'api-1', executionRunId: expect.any(String) } });
      let report = (await call('GET', '/api/runs/api-1')).body;
      while (report.execution === 'RUNNING') {
        await new Promise((r) => setTimeout(r, 500));
        report = (await call('GET', '/api/runs/api-1')).body;
      }
      expect(report).toMatchObject({
        execution: 'COMPLETED',
        status: {
          state: 'finished',
          policyVersion: 'api-1.v1',
          heldout: { base: { policyVersion: 'v0' }, latest: { policyVersion: 'api-1.v1' } },
        },
      });
      expect((await call('GET', '/api/runs?limit=50')).body.items).toContainEqual(
        expect.objectContaining({ runId: 'api-1', execution: 'COMPLETED' }),
      );
      expect((await call('GET', '/api/policies?runId=api-1')).body.items).toEqual([
        expect.objectContaining({ version: 'api-1.v1', parent: 'v0', iteration: 1 }),
      ]);

      // Each stage's duration and the release child, from what the iteration workflow recorded.
      const [iteration] = (await call('GET', '/api/runs/api-1/iterations')).body.iterations as Array<{
        stageSeconds: Record<string, number>;
        workflows: Array<{ label: string; workflowId: string }>;
      }>;
      expect(Object.keys(iteration!.stageSeconds).sort()).toEqual(['batch', 'heldout', 'ledger', 'rollouts', 'update']);
      expect(Object.values(iteration!.stageSeconds).every((s) => s >= 0)).toBe(true);
      expect(iteration!.workflows).toEqual([
        expect.objectContaining({ label: 'iteration 1', workflowId: 'api-1-it1' }),
        expect.objectContaining({ label: 'iteration 1 release', workflowId: 'api-1-it1-release' }),
      ]);

      // The gate's decision on the candidate, with its evidence; the iteration's ledger row.
      const gate = report.status.iterations[0].gate;
      expect(gate).toMatchObject({ incumbent: 'v0', decisionId: expect.any(String) });
      expect((await call('GET', `/api/decisions/${gate.decisionId}`)).body).toMatchObject({
        candidate: 'api-1.v1',
        incumbent: 'v0',
        verdict: gate.verdict,
        record: { checks: expect.any(Array) },
      });
      expect(await call('GET', '/api/decisions/nope')).toMatchObject({
        status: 404,
        body: { error: { code: 'decision_not_found' } },
      });
      // A row for the iteration and one for its release (every release is one, refused or not).
      const ledger = (await call('GET', '/api/ledger?runId=api-1')).body.items as Array<{ id: string }>;
      expect([...ledger].sort((a, b) => a.id.localeCompare(b.id))).toEqual([
        expect.objectContaining({
          id: 'api-1.it1',
          kind: 'iteration',
          model: { policyVersion: 'api-1.v1', parent: 'v0' },
        }),
        expect.objectContaining({
          id: 'release.api-1.v1',
          kind: 'release',
          model: { policyVersion: 'api-1.v1', parent: 'v0' },
          decisionId: expect.any(String),
        }),
      ]);

      // Promotion by override (whatever the gate said), then rollback; both audited.
      if (!gate.promoted) {
        if (gate.verdict === 'fail')
          expect(await call('POST', '/api/policies/api-1.v1/promote')).toMatchObject({
            status: 409,
            body: { error: { code: 'promotion_refused' } },
          });
        expect(
          await call('POST', '/api/policies/api-1.v1/promote', { override: { reason: 'api test' } }),
        ).toMatchObject({
          status: 200,
          body: { change: { from: 'v0', to: 'api-1.v1', override: true }, gatewayUpdated: true },
        });
      }
      expect(await call('POST', '/api/production/rollback', { reason: 'api test' })).toMatchObject({
        status: 200,
        body: { change: { from: 'api-1.v1', to: 'v0', operation: 'rollback' } },
      });
      expect((await call('GET', '/api/aliases')).body).toMatchObject({
        aliases: { production: 'v0' },
        history: expect.arrayContaining([expect.objectContaining({ operation: 'rollback', reason: 'api test' })]),
      });
      expect(await call('POST', '/api/policies/no-such/promote', { override: { reason: 'x' } })).toMatchObject({
        status: 404,
      });

      // A release by hand: the same candidate, incumbent, config and tasks make the same decision (its replays are
      // reused).
      const release = await call('POST', '/api/releases', { candidate: 'api-1.v1' });
      expect(release).toMatchObject({
        status: 202,
        body: { workflowId: expect.stringMatching(/^release-api-1\.v1-/), decisionId: gate.decisionId },
      });
      expect(await call('POST', '/api/releases', { candidate: 'api-1.v1', promote: 'yes' })).toMatchObject({
        status: 400,
      });
      expect(await call('POST', '/api/runs', { runId: 'api-1' })).toMatchObject({
        status: 409,
        body: { error: { code: 'run_exists' } },
      });
      expect(await call('POST', '/api/runs/api-1/stop')).toMatchObject({ status: 404 });
      expect(await call('POST', '/api/runs/api-1/resume')).toMatchObject({
        status: 409,
        body: { error: { code: 'run_not_resumable', message: expect.stringContaining('completed') } },
      });
    },
  );

  it(
    'continues a terminated run from where it stopped, as a new execution under the same id',
    { timeout: 180_000 },
    async () => {
      const started = await call('POST', '/api/runs', { runId: 'api-2' });
      expect(started).toMatchObject({ status: 201 });
      const { client, connection } = await testClient(namespace);
      try {
        await client.workflow.getHandle('api-2').terminate('api test: an operator ended it');
      } finally {
        await connection.close();
      }
      const resumed = await call('POST', '/api/runs/api-2/resume');
      expect(resumed).toMatchObject({
        status: 202,
        body: {
          action: 'continued',
          fromIteration: 1,
          previousStatus: 'TERMINATED',
          executionRunId: expect.any(String),
        },
      });
      expect(resumed.body.executionRunId).not.toBe(started.body.executionRunId);
      let report = (await call('GET', '/api/runs/api-2')).body;
      while (report.execution === 'RUNNING') {
        await new Promise((r) => setTimeout(r, 500));
        report = (await call('GET', '/api/runs/api-2')).body;
      }
      expect(report).toMatchObject({
        execution: 'COMPLETED',
        status: { state: 'finished', policyVersion: 'api-2.v1' },
      });
    },
  );

  it('creates, lists, pauses and deletes schedules', async () => {
    expect(
      await call('POST', '/api/schedules', { scheduleId: 'api-weekly', cron: '0 3 * * 1', note: 'weekly' }),
    ).toMatchObject({ status: 201 });
    expect(await call('POST', '/api/schedules', { scheduleId: 'api-weekly', every: '1d' })).toMatchObject({
      status: 409,
    });
    // Listed from Temporal's visibility store, which may lag a moment behind the create.
    await expect
      .poll(async () => (await call('GET', '/api/schedules')).body.items, { timeout: 20_000 })
      .toContainEqual(expect.objectContaining({ scheduleId: 'api-weekly', paused: false, spec: 'cron 0 3 * * 1' }));
    expect(await call('POST', '/api/schedules/api-weekly/pause', { note: 'freeze' })).toMatchObject({ status: 202 });
    // The list comes from Temporal's visibility store, which catches up within moments.
    await expect
      .poll(async () => (await call('GET', '/api/schedules')).body.items, { timeout: 10_000 })
      .toContainEqual(expect.objectContaining({ scheduleId: 'api-weekly', paused: true, note: 'freeze' }));
    expect(await call('DELETE', '/api/schedules/api-weekly')).toMatchObject({ status: 200 });
    expect(await call('DELETE', '/api/schedules/api-weekly')).toMatchObject({ status: 404 });
  });
});
