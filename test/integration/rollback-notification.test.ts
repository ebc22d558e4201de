import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startApi } from '../../src/api/server.js';
import { loadConfig } from '../../src/config/load.js';
import { sha256Hex } from '../../src/gateway/keys.js';
import { withRegistry } from '../../src/registry/open.js';
import { testClient } from '../helpers/temporal.js';
import { signature } from '../../src/notify/webhook.js';
import { runRein } from '../helpers/cli.js';
import { suiteStoreSettings } from '../helpers/postgres.js';
import { startReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-rollback-notify-'));
const file = path.join(dir, 'rein.json');
const SECRET = 'rollback-webhook-secret';
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await startReceiver();
  const dataDir = path.join(dir, 'data');
  const { store } = await suiteStoreSettings();
  writeFileSync(
    file,
    JSON.stringify({
      dataDir,
      ...(store && { store }),
      log: { level: 'warn' },
      notifications: {
        webhook: { url: receiver.url, secretEnv: 'ROLLBACK_WEBHOOK_SECRET', events: ['promotion', 'rollback'] },
      },
    }),
  );
  await withRegistry({ dataDir, postgresUrl: store?.url ?? null }, async (registry) => {
    for (const [version, parent] of [
      ['v0', null],
      ['v1', 'v0'],
    ] as const) {
      await registry.register({
        version,
        parent,
        runId: null,
        iteration: null,
        checkpointUri: `file:///stub/${version}`,
        batchContentHash: null,
        trainerMetrics: {},
      });
    }
    await registry.setAlias('production', 'v0', {
      operation: 'set',
      actor: 'test',
      reason: null,
      override: false,
      decisionId: null,
    });
  });
});
afterAll(async () => {
  await receiver?.close();
  rmSync(dir, { recursive: true, force: true });
});

const rein = (...args: string[]) =>
  runRein(['--config', file, ...args], { env: { ROLLBACK_WEBHOOK_SECRET: SECRET, REIN_GATEWAY_ADMIN_KEY: undefined } });

describe('`rein promote` and `rein rollback` tell the webhook', () => {
  it(
    'sends the promotion, then the rollback through a receiver that fails twice (retried with backoff, warned about)',
    { timeout: 120_000 },
    async () => {
      const promoted = await rein('promote', 'v1', '--override', 'hotfix for the outage');
      expect(promoted.code, promoted.stderr).toBe(0);
      expect(receiver.received).toHaveLength(1);
      expect(receiver.received[0]?.body).toMatchObject({
        event: 'promotion',
        versions: { from: 'v0', to: 'v1', production: 'v1', candidate: 'v1', incumbent: 'v0' },
        reasons: ['hotfix for the outage'],
        actor: expect.stringMatching(/^cli:/),
      });

      receiver.reset();
      receiver.failing(2);
      const back = await rein('rollback', '--reason', 'pager went off');
      expect(back.code, back.stderr).toBe(0);
      expect(back.stdout).toContain('v1 → v0');
      expect(receiver.received.map((r) => r.answered)).toEqual([503, 503, 204]);
      expect(back.stderr).toMatch(/rollback notification .* failed \(try 1 of 6\)/);
      expect(back.stderr).toMatch(/failed \(try 2 of 6\)/);
      const [delivered] = receiver.received.slice(-1);
      expect(delivered?.body).toMatchObject({
        event: 'rollback',
        versions: { from: 'v1', to: 'v0', production: 'v0' },
        reasons: ['pager went off'],
      });
      expect(new Set(receiver.received.map((r) => r.body.id)).size).toBe(1);
      expect(delivered?.headers['x-rein-signature']).toBe(`sha256=${signature(SECRET, delivered?.text ?? '')}`);
    },
  );

  it(
    'warns about a webhook setting that cannot work (its secret variable unset) and leaves the promotion made',
    { timeout: 120_000 },
    async () => {
      receiver.reset();
      writeFileSync(
        file,
        JSON.stringify({
          ...JSON.parse(readFileSync(file, 'utf8')),
          notifications: { webhook: { url: receiver.url, secretEnv: 'UNSET_WEBHOOK_SECRET' } },
        }),
      );
      const promoted = await rein('promote', 'v1', '--override', 'again');
      expect(promoted.code, promoted.stderr).toBe(0);
      expect(promoted.stderr).toContain('warning: the promotion notification');
      expect(promoted.stderr).toContain(
        'notifications.webhook.secretEnv names UNSET_WEBHOOK_SECRET, which is not set in the environment',
      );
      expect(receiver.received).toHaveLength(0);
    },
  );

  it(
    'the API: POST /api/production/rollback answers at once and the webhook gets the rollback',
    { timeout: 120_000 },
    async () => {
      receiver.reset();
      writeFileSync(
        file,
        JSON.stringify({
          ...JSON.parse(readFileSync(file, 'utf8')),
          notifications: { webhook: { url: receiver.url, events: ['rollback'] } },
        }),
      );
      const { client, connection } = await testClient();
      const api = await startApi(
        { config: loadConfig({ file }).config, client, keyHash: sha256Hex('api-key') },
        { host: '127.0.0.1', port: 0 },
      );
      try {
        const res = await fetch(`${api.url}/api/production/rollback`, {
          method: 'POST',
          headers: { authorization: 'Bearer api-key', 'content-type': 'application/json' },
          body: JSON.stringify({ reason: 'from the api' }),
        });
        expect(res.status).toBe(200);
        await vi.waitFor(() => expect(receiver.received).toHaveLength(1), { timeout: 30_000, interval: 50 });
        expect(receiver.received[0]?.body).toMatchObject({
          event: 'rollback',
          versions: { from: 'v1', to: 'v0' },
          reasons: ['from the api'],
          actor: 'api',
        });
      } finally {
        await api.close();
        await connection.close();
      }
    },
  );
});
