import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type ApiServer } from '../../src/api/server.js';
import type { ArtifactStore } from '../../src/artifacts/artifact-store.js';
import { LocalArtifactStore } from '../../src/artifacts/local-store.js';
import { S3ArtifactStore } from '../../src/artifacts/s3-store.js';
import { validateConfig } from '../../src/config/load.js';
import { GatewayControlClient } from '../../src/gateway/control-client.js';
import { adminKeyFile } from '../../src/gateway/from-config.js';
import { sha256Hex } from '../../src/gateway/keys.js';
import { DEFAULT_REDACTION_RULES } from '../../src/gateway/redact.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import { LOG_NOT_UPLOADED_EVENT } from '../../src/rollouts/rollout-logs.js';
import { runRollouts, type RolloutBatchSpec, type RunnerDeps, type VerifierSpec } from '../../src/rollouts/runner.js';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startTestS3, type TestS3 } from '../helpers/s3.js';
import { testClient } from '../helpers/temporal.js';

const fixtures = path.resolve(import.meta.dirname, '../fixtures/harnesses');
const PROVIDER_KEY = `sk-${'pRoV1der'.repeat(4)}`;

let t: TestGateway;
let gateway: GatewayControlClient;
let s3: TestS3;
let bucket: string;
let scratch: string;
/** The worker's data directory; the API's is another (they run on different hosts). */
let workerDataDir: string;
beforeAll(async () => {
  [t, s3] = await Promise.all([startTestGateway(), startTestS3()]);
  gateway = new GatewayControlClient(t.gateway.url, ADMIN_KEY);
  bucket = await s3.bucket();
  scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-rollout-logs-'));
  workerDataDir = path.join(scratch, 'worker');
});
afterAll(async () => {
  await t?.close();
  await s3?.close();
  rmSync(scratch, { recursive: true, force: true });
});

const harness = localExecutor({
  command: process.execPath,
  args: [path.join(fixtures, 'chatty.mjs'), '{task}', '{output}'],
  env: { PROVIDER_KEY },
  timeoutMs: 20_000,
});
// A verifier that prints its own key to its log before its verdict.
const verifier: VerifierSpec = {
  command: process.execPath,
  args: [
    '-e',
    `console.error('debug: REIN_VERIFIER_KEY=' + process.env.REIN_VERIFIER_KEY); console.log(JSON.stringify({ components: { success: 1 } }))`,
  ],
  timeoutMs: 20_000,
};
const batch = (batchId: string, dataDir = workerDataDir): RolloutBatchSpec => ({
  batchId,
  tasks: [{ id: 'q', question: '6*7', answer: 42 }],
  samplesPerTask: 1,
  mode: 'train',
  policyVersion: 'policy-v1',
  hiddenFields: ['answer'],
  rewardWeights: { success: 1 },
  concurrency: 1,
  maxAttempts: 1,
  workDir: path.join(dataDir, 'rollouts'),
});
const s3Store = (name = bucket) => new S3ArtifactStore(`s3://${name}/rein`, { endpoint: s3.endpoint });
const run = async (batchId: string, artifacts: ArtifactStore, extra: Partial<RunnerDeps> = {}) => {
  const warnings: string[] = [];
  const [outcome] = await runRollouts(batch(batchId), {
    gateway,
    harness,
    verifier,
    logUpload: { artifacts, redaction: DEFAULT_REDACTION_RULES, retryDelaysMs: [0] },
    onWarning: (w) => warnings.push(w),
    ...extra,
  });
  return { outcome, warnings, rolloutId: `${batchId}.q.0` };
};
const text = async (store: ArtifactStore, name: string) => (await store.get(store.uriOf(name))).toString('utf8');

describe("the harness's and verifier's logs in the artifact store", () => {
  it.each([
    ['a local folder', () => new LocalArtifactStore(path.join(scratch, 'artifacts'))],
    ['S3', () => s3Store()],
  ])(
    'are uploaded to %s when each ends, redacted by the gateway rules, as the local files already are',
    async (kind, open) => {
      const store = open();
      const { outcome, warnings, rolloutId } = await run(kind === 'S3' ? 's3' : 'local', store);
      expect(outcome).toMatchObject({ status: 'succeeded', reward: 1 });
      expect(warnings).toEqual([]);
      expect(await store.list(`rollouts/${rolloutId}/`)).toEqual([
        store.uriOf(`rollouts/${rolloutId}/harness-1.log`),
        store.uriOf(`rollouts/${rolloutId}/verifier.log`),
      ]);
      const harnessLog = await text(store, `rollouts/${rolloutId}/harness-1.log`);
      expect(harnessLog).toContain('debug: OPENAI_API_KEY=[REDACTED:rollout-key] PROVIDER_KEY=[REDACTED:openai-key]');
      expect(harnessLog).toContain('model said:');
      expect(harnessLog).not.toContain(PROVIDER_KEY);
      expect(await text(store, `rollouts/${rolloutId}/verifier.log`)).toMatch(
        /^debug: REIN_VERIFIER_KEY=\[REDACTED:verifier-key\]\n\{"components":\{"success":1\}\}\n$/,
      );
      // The worker's own copy was redacted as the harness wrote it: no secret ever reached its disk.
      const local = readFileSync(path.join(workerDataDir, 'rollouts', rolloutId, 'harness-1.log'), 'utf8');
      expect(local).not.toContain(PROVIDER_KEY);
      expect(local).toContain('PROVIDER_KEY=[REDACTED:openai-key]');
    },
  );

  it('a store that refuses (no such bucket) or is gone costs the rollout nothing: it succeeds, the worker is warned, the local logs stay, and its events say so', async () => {
    const gone = await startTestS3();
    const goneStore = new S3ArtifactStore(`s3://${await gone.bucket()}/rein`, { endpoint: gone.endpoint });
    await gone.close();
    for (const [batchId, store] of [
      ['nobucket', s3Store('rein-no-such-bucket')],
      ['gone', goneStore],
    ] as const) {
      const { outcome, warnings, rolloutId } = await run(batchId, store);
      expect(outcome).toMatchObject({ status: 'succeeded', reward: 1 });
      expect(warnings).toHaveLength(2);
      expect(warnings[0]).toContain(
        `rollout ${rolloutId}: harness-1.log was not uploaded to the artifact store (${store.url}: `,
      );
      expect(warnings[1]).toContain(`rollout ${rolloutId}: verifier.log was not uploaded`);
      for (const file of ['harness-1.log', 'verifier.log'])
        expect(existsSync(path.join(workerDataDir, 'rollouts', rolloutId, file))).toBe(true);
      const notUploaded = (await t.store.listEvents(rolloutId)).filter(
        (e) => e.type === 'custom' && e.payload.name === LOG_NOT_UPLOADED_EVENT,
      );
      expect(notUploaded.map((e) => [e.source, (e.payload.data as { file: string }).file])).toEqual([
        ['admin', 'harness-1.log'],
        ['admin', 'verifier.log'],
      ]);
      expect((await t.store.getRollout(rolloutId))?.status).toBe('succeeded');
    }
  });

  describe('the API on another host', () => {
    let api: ApiServer;
    let connection: Connection;
    let apiDataDir: string;
    beforeAll(async () => {
      apiDataDir = path.join(scratch, 'api');
      // Paths as loadConfig resolves them against dataDir (validateConfig alone leaves them relative to the working
      // directory).
      const config = validateConfig(
        {
          dataDir: apiDataDir,
          gateway: { publicUrl: t.gateway.url, secretFile: path.join(apiDataDir, 'gateway', 'secret') },
          artifacts: { url: `s3://${bucket}/rein`, s3: { endpoint: s3.endpoint } },
        },
        'test',
      );
      // What `rein gateway` writes where the API reads the gateway's admin key.
      mkdirSync(path.dirname(adminKeyFile(config.gateway)), { recursive: true });
      writeFileSync(adminKeyFile(config.gateway), `${ADMIN_KEY}\n`);
      const temporal = await testClient();
      connection = temporal.connection;
      api = await startApi(
        { config, client: temporal.client, keyHash: sha256Hex(ADMIN_KEY) },
        { host: '127.0.0.1', port: 0 },
      );
    });
    afterAll(async () => {
      await api?.close();
      await connection?.close();
    });
    const view = async (rolloutId: string) => {
      const res = await fetch(`${api.url}/api/rollouts/${rolloutId}`, {
        headers: { authorization: `Bearer ${ADMIN_KEY}` },
      });
      expect(res.status).toBe(200);
      return (await res.json()) as {
        logs: Array<{ name: string; text: string; truncatedBytes: number; source: string; note?: string }>;
        logsProblem: string | null;
      };
    };

    it('reads the logs a worker uploaded, says which ones a worker could not upload and where they stayed, and still shows a log only on its own disk', async () => {
      const uploaded = await view('s3.q.0');
      expect(uploaded.logsProblem).toBeNull();
      expect(uploaded.logs.map((l) => [l.name, l.source, l.truncatedBytes])).toEqual([
        ['harness-1.log', 'artifacts', 0],
        ['verifier.log', 'artifacts', 0],
      ]);
      expect(uploaded.logs[0]?.text).toContain('PROVIDER_KEY=[REDACTED:openai-key]');

      const missing = await view('nobucket.q.0');
      expect(missing.logs.map((l) => [l.name, l.source])).toEqual([
        ['harness-1.log', 'missing'],
        ['verifier.log', 'missing'],
      ]);
      expect(missing.logs[0]?.note).toContain(
        `it stays on the worker ${os.hostname()} at ${path.join(workerDataDir, 'rollouts', 'nobucket.q.0', 'harness-1.log')}`,
      );

      // A rollout from before uploads, run beside the API: its folder is read as before.
      const [old] = await runRollouts(batch('old', apiDataDir), { gateway, harness, verifier });
      expect(old?.status).toBe('succeeded');
      const local = await view('old.q.0');
      expect(local.logs.map((l) => [l.name, l.source])).toEqual([
        ['harness-1.log', 'local'],
        ['verifier.log', 'local'],
      ]);
    });

    it('keeps the last 64 KiB of an uploaded log, counting what the upload cut and what it leaves out', async () => {
      const store = s3Store();
      const line = `${'x'.repeat(99)}\n`;
      await store.put(
        'rollouts/big.q.0/harness-1.log',
        `[rein: the first 5000 bytes of this log were cut before upload; it keeps the last 100000]\n${line.repeat(1000)}`,
      );
      await gateway.createRollout({ id: 'big.q.0', taskId: 'q', mode: 'train' });
      const [log] = (await view('big.q.0')).logs;
      expect(log).toMatchObject({
        name: 'harness-1.log',
        source: 'artifacts',
        truncatedBytes: 5000 + 100_000 - 64 * 1024,
      });
      expect(Buffer.byteLength(log?.text ?? '')).toBe(64 * 1024);
    });
  });
});
