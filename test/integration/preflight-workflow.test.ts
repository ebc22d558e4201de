import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureSearchAttributes } from '../../src/client/temporal.js';
import { runPreflight } from '../../src/client/preflight.js';
import { REIN_SEARCH_ATTRIBUTES } from '../../src/search-attributes.js';
import { testClient, withReinWorker } from '../helpers/temporal.js';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-preflight-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('preflight workflow on a real Temporal server', () => {
  it('runs its activity on a Rein worker and records the stage as a search attribute', async () => {
    const dataDir = path.join(scratch, 'data');
    const run = await withReinWorker(({ client, taskQueue }) => runPreflight(client, taskQueue), { dataDir });

    expect(run.result.ok).toBe(true);
    expect(run.result.worker.dataDir).toBe(dataDir);
    expect(run.result.worker.checks.map((c) => c.name)).toEqual([
      'node version',
      'data dir writable',
      'free disk space',
    ]);

    const { client, connection } = await testClient();
    try {
      const description = await client.workflow.getHandle(run.workflowId, run.runId).describe();
      expect(description.status.name).toBe('COMPLETED');
      expect(description.searchAttributes.ReinStage).toEqual(['preflight-passed']);
      const listed = [];
      for await (const wf of client.workflow.list({
        query: `WorkflowId = "${run.workflowId}" AND ReinStage = "preflight-passed"`,
      })) {
        listed.push(wf.workflowId);
      }
      expect(listed).toEqual([run.workflowId]);
    } finally {
      await connection.close();
    }
  });

  it('reports a failed check, naming the data directory that cannot be written', async () => {
    const notADir = path.join(scratch, 'occupied');
    writeFileSync(notADir, 'a file where the data directory should be');
    const run = await withReinWorker(({ client, taskQueue }) => runPreflight(client, taskQueue), { dataDir: notADir });

    expect(run.result.ok).toBe(false);
    const failed = run.result.worker.checks.find((c) => c.name === 'data dir writable');
    expect(failed).toMatchObject({ ok: false, detail: expect.stringContaining(notADir) });
  });

  it('registers every Rein search attribute once, and a second call creates nothing', async () => {
    const { connection } = await testClient();
    try {
      expect(await ensureSearchAttributes(connection, 'default')).toEqual({ created: [] });
      const listed = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
      expect(Object.keys(listed.customAttributes)).toEqual(expect.arrayContaining(Object.keys(REIN_SEARCH_ATTRIBUTES)));
    } finally {
      await connection.close();
    }
  });
});
