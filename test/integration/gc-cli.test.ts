import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/store/sqlite-driver.js';
import { afterAll, expect, it } from 'vitest';
import { registryFile, SqlitePolicyRegistry } from '../../src/registry/registry-store.js';
import type { GcReport } from '../../src/retention/gc.js';
import { SqliteTraceStore } from '../../src/store/sqlite-store.js';
import { runRein } from '../helpers/cli.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-gc-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const DAY = 86_400_000;

/** A file (and the folders down to it) last written `days` ago. */
function oldFile(file: string, bytes: number, days: number): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, 'x'.repeat(bytes));
  const then = new Date(Date.now() - days * DAY);
  utimesSync(file, then, then);
  utimesSync(path.dirname(file), then, then);
}

it('rein gc --dry-run says what the retention settings would delete and how much; rein gc deletes it and keeps what a trained version needs', async () => {
  const dataDir = path.join(dir, 'data');
  // SQLite on purpose: the journal is aged below with SQL. gc.test.ts runs the same on PostgreSQL.
  writeFileSync(
    path.join(dir, 'rein.json'),
    JSON.stringify({ dataDir: 'data', retention: { journal: '7d', rolloutFolders: '3d', staging: '1d' } }),
  );
  const env = { REIN_STORE_URL: undefined, REIN_DATA_DIR: undefined, REIN_CONFIG: undefined };

  // The journal and registry as a run leaves them: r1.v1 trained on batch r1.it1; an old ad hoc rollout; a young one.
  const store = new SqliteTraceStore(path.join(dataDir, 'traces.sqlite'));
  for (const [id, batchId] of [
    ['r1.it1.t.0', 'r1.it1'],
    ['adhoc', null],
    ['young', null],
  ] as const) {
    await store.createRollout({ id, taskId: 't', metadata: batchId ? { batchId } : {} });
    await store.setRolloutStatus(id, { status: 'running' }, 'admin');
    const callId = randomUUID();
    await store.beginCall({
      id: callId,
      rolloutId: id,
      attempt: 1,
      endpoint: 'chat.completions',
      policyVersion: 'v0',
      backendUrl: 'http://b',
      stream: false,
      requestReceived: { messages: [{ role: 'user', content: 'x'.repeat(1000) }] },
      requestSent: {},
      startedAt: Date.now(),
    });
    await store.finishCall(callId, {
      response: {},
      promptIds: [1],
      choices: [{ completionIds: [2], logprobs: [-1], finishReason: 'stop' }],
      usage: null,
      upstreamStatus: 200,
      errorClass: null,
      errorMessage: null,
      ttftMs: 1,
      latencyMs: 1,
    });
    await store.setRolloutStatus(id, { status: 'succeeded' }, 'admin');
  }
  await store.close();
  const registry = new SqlitePolicyRegistry(registryFile(dataDir));
  await registry.register({
    version: 'v0',
    parent: null,
    runId: null,
    iteration: null,
    checkpointUri: '/base',
    batchContentHash: null,
    trainerMetrics: {},
  });
  await registry.register({
    version: 'r1.v1',
    parent: 'v0',
    runId: 'r1',
    iteration: 1,
    checkpointUri: '/c',
    batchContentHash: 'h',
    trainerMetrics: {},
  });
  await registry.close();
  const db = openDatabase(path.join(dataDir, 'traces.sqlite'));
  db.prepare("UPDATE rollouts SET updated_at = updated_at - 10 * ? WHERE id IN ('r1.it1.t.0', 'adhoc')").run(DAY);
  db.close();

  const rollouts = path.join(dataDir, 'rollouts');
  oldFile(path.join(rollouts, 'r1.it1.t.0', 'harness-1.log'), 3000, 10);
  oldFile(path.join(rollouts, 'adhoc', 'harness-1.log'), 2000, 10);
  oldFile(path.join(rollouts, 'young', 'harness-1.log'), 500, 1);
  oldFile(path.join(rollouts, 'notes.txt'), 100, 10);
  oldFile(path.join(dataDir, 'staging', 'batches', 'abc-batch.safetensors'), 4000, 2);
  const deadWrite = path.join(dataDir, 'artifacts', 'runs', 'r1', `batch.safetensors.${randomUUID()}.tmp`);
  oldFile(deadWrite, 1000, 2);
  const artifact = path.join(dataDir, 'artifacts', 'runs', 'r1', 'batch.safetensors');
  oldFile(artifact, 1000, 30);
  // Logs the workers uploaded to the artifact store (here its local folder): they go with their rollout's folder.
  oldFile(path.join(dataDir, 'artifacts', 'rollouts', 'adhoc', 'harness-1.log'), 700, 10);
  oldFile(path.join(dataDir, 'artifacts', 'rollouts', 'r1.it1.t.0', 'harness-1.log'), 300, 10);

  const dry = await runRein(['--config', path.join(dir, 'rein.json'), 'gc', '--dry-run'], { env });
  expect(dry.stderr).toBe('');
  expect(dry.code).toBe(0);
  expect(dry.stdout).toContain('Dry run: nothing was deleted');
  expect(dry.stdout).toMatch(
    /journal \(retention\.journal 7d\): finished rollouts last changed before \S+\n {2}would delete 1 rollouts: 1 calls, 0 shadow calls, 2 events, [\d.]+ KiB/,
  );
  expect(dry.stdout).toMatch(
    /1 rollouts \([\d.]+ KiB\) in the batch a registered policy version was trained on: r1\.v1/,
  );
  expect(dry.stdout).toContain('oldest kept: r1.it1.t.0');
  expect(dry.stdout).toMatch(
    /rollout folders \(retention\.rolloutFolders 3d\)[^\n]*\n {2}would delete 1 folders, 2\.0 KiB\n {2}kept though old enough:\n {4}1 folders \(2\.9 KiB\) in the batch a registered policy version was trained on: r1\.v1/,
  );
  expect(dry.stdout).toMatch(
    /rollout logs in the artifact store \(retention\.rolloutFolders 3d\)[^\n]*\n {2}would delete the logs of 1 rollouts \(1 objects\), 700\.0 B\n {2}kept though old enough:\n {4}1 rollouts \(300\.0 B\) in the batch/,
  );
  expect(dry.stdout).toMatch(/staging \(retention\.staging 1d\)[^\n]*\n {2}would delete 2 entries, 4\.9 KiB/);
  expect(dry.stdout).toMatch(/Would free [\d.]+ KiB in all\./);
  expect(existsSync(path.join(rollouts, 'adhoc'))).toBe(true);
  expect(existsSync(deadWrite)).toBe(true);

  const done = await runRein(['--config', path.join(dir, 'rein.json'), 'gc', '--json'], { env });
  expect(done.stderr).toBe('');
  expect(done.code).toBe(0);
  const report = JSON.parse(done.stdout) as GcReport;
  expect(report.dryRun).toBe(false);
  expect(report.journal?.delete).toMatchObject({ rollouts: 1, calls: 1 });
  expect(report.rolloutFolders?.delete).toEqual({ folders: 1, bytes: 2000 });
  expect(report.staging?.delete).toEqual({ entries: 2, bytes: 5000 });
  expect(report.rolloutLogs?.delete).toEqual({ rollouts: 1, objects: 1, bytes: 700 });
  expect(report.bytes).toBe((report.journal?.delete.bytes ?? 0) + 7700);

  for (const gone of [
    path.join(rollouts, 'adhoc'),
    path.join(dataDir, 'artifacts', 'rollouts', 'adhoc', 'harness-1.log'),
    deadWrite,
    path.join(dataDir, 'staging', 'batches', 'abc-batch.safetensors'),
  ])
    expect(existsSync(gone)).toBe(false);
  for (const kept of [
    path.join(rollouts, 'r1.it1.t.0'),
    path.join(dataDir, 'artifacts', 'rollouts', 'r1.it1.t.0', 'harness-1.log'),
    path.join(rollouts, 'young'),
    path.join(rollouts, 'notes.txt'),
    artifact,
  ])
    expect(existsSync(kept)).toBe(true);
  const reopened = new SqliteTraceStore(path.join(dataDir, 'traces.sqlite'));
  expect(await reopened.getRollout('adhoc')).toBeUndefined();
  expect(await reopened.listCalls('r1.it1.t.0')).toHaveLength(1);
  expect(await reopened.listCalls('young')).toHaveLength(1);
  await reopened.close();
});

it('rein gc with no retention configured keeps everything and says how to set it', async () => {
  writeFileSync(path.join(dir, 'empty.json'), JSON.stringify({ dataDir: 'empty-data' }));
  const result = await runRein(['--config', path.join(dir, 'empty.json'), 'gc', '--dry-run'], {
    env: { REIN_STORE_URL: undefined, REIN_DATA_DIR: undefined },
  });
  expect(result.code).toBe(0);
  expect(result.stdout).toContain('No retention is configured: Rein keeps everything. Set retention.journal');
  // Nothing was opened, so nothing was made.
  expect(existsSync(path.join(dir, 'empty-data'))).toBe(false);
});
