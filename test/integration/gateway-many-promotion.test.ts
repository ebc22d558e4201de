import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import pg from 'pg';
import { stringify } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { openRegistry } from '../../src/registry/open.js';
import { promote, rollback } from '../../src/registry/promotion.js';
import { startRein } from '../helpers/cli.js';
import { gatewayConfigFile } from '../helpers/gateway.js';
import { freePort } from '../helpers/ports.js';
import { freshPostgresUrl } from '../helpers/postgres.js';
import { startVllmLikeServer } from '../helpers/vllm-like-server.js';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-gateway-many-promotion-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const ADMIN = 'many-gateways-admin-key';

async function until<T>(
  what: string,
  read: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last seen ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('a promotion with many gateways on one PostgreSQL registry', () => {
  it('reaches every gateway at once, with no call to any of them, also after their listening connection was cut', async () => {
    const server = await startVllmLikeServer();
    const storeUrl = await freshPostgresUrl();
    const config = path.join(scratch, 'rein.yaml');
    // Trained versions are served by the backend the config names for them; here the one upstream.
    writeFileSync(config, stringify({ ...gatewayConfigFile(server.url, 1), trainer: { servingBackend: 'toy' } }));
    const env = {
      REIN_GATEWAY_ADMIN_KEY: ADMIN,
      REIN_CONFIG: undefined,
      REIN_DATA_DIR: undefined,
      REIN_STORE_URL: storeUrl,
    };
    const ports = [await freePort(), await freePort()];
    const gateways = ports.map((port) =>
      startRein(['--config', config, 'gateway'], { cwd: scratch, env: { ...env, REIN_GATEWAY_PORT: String(port) } }),
    );
    const registry = await openRegistry({ dataDir: path.join(scratch, 'data'), postgresUrl: storeUrl });
    try {
      await Promise.all(gateways.map((g) => g.waitFor(/Gateway ready/)));
      const urls = ports.map((port) => `http://127.0.0.1:${port}`);
      const admin = async (gateway: string, method: string, route: string, body?: unknown) => {
        const res = await fetch(`${gateway}${route}`, {
          method,
          headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return res.json() as Promise<any>;
      };
      const productionOn = async (gateway: string) =>
        (
          (await admin(gateway, 'GET', '/api/policies')).items as Array<{ policyVersion: string; aliases: string[] }>
        ).find((p) => p.aliases.includes('production'))?.policyVersion;
      const everywhere = (version: string) =>
        until(
          `production → ${version} on both gateways`,
          () => Promise.all(urls.map(productionOn)),
          (seen) => seen.every((v) => v === version),
        );
      expect(await Promise.all(urls.map(productionOn))).toEqual(['policy-v1', 'policy-v1']);

      const lineage = { runId: 'many', iteration: 1, batchContentHash: null, trainerMetrics: {} };
      await registry.register({ ...lineage, version: 'policy-v1', parent: null, checkpointUri: 'policy-v1' });
      await registry.register({
        ...lineage,
        version: 'many.v1',
        parent: 'policy-v1',
        checkpointUri: '/checkpoints/many.v1',
      });
      // Loaded on the inference server, as the release stage does before it promotes.
      await fetch(`${server.url.replace(/\/v1$/, '')}/v1/load_lora_adapter`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ lora_name: 'many.v1', lora_path: '/checkpoints/many.v1' }),
      });
      await registry.setAlias(
        'production',
        'policy-v1',
        { operation: 'set', actor: 'test', reason: 'production starts at the base' },
        { expectedFrom: null },
      );
      // The trained version is routed by both, though neither was asked to.
      await until(
        'many.v1 routed on both gateways',
        () =>
          Promise.all(
            urls.map(async (u) =>
              (await admin(u, 'GET', '/api/policies')).items.map((p: { policyVersion: string }) => p.policyVersion),
            ),
          ),
        (lists) => lists.every((l) => l.includes('many.v1')),
      );

      // Promoted from here, with no gateway to tell (as from a worker behind a load balancer).
      const promoted = await promote(registry, undefined, {
        version: 'many.v1',
        actor: 'test',
        override: { reason: 'test: many gateways' },
      });
      expect(promoted.gatewayUpdated).toBe(false);
      await everywhere('many.v1');

      // A harness's call through either gateway asks production and is answered by the promoted version.
      const created = await admin(urls[0] as string, 'POST', '/api/rollouts', { id: 'after-promotion' });
      for (const url of urls) {
        const client = new OpenAI({ apiKey: created.key, baseURL: `${url}/v1`, maxRetries: 0 });
        const { response } = await client.chat.completions
          .create({ model: 'production', messages: [{ role: 'user', content: 'hi' }] })
          .withResponse();
        const callId = response.headers.get('x-rein-call-id');
        const calls = (await admin(url, 'GET', '/api/rollouts/after-promotion/calls')).items as Array<{
          id: string;
          policyVersion: string;
        }>;
        expect(calls.find((c) => c.id === callId)?.policyVersion).toBe('many.v1');
      }

      // The connections that hear registry changes are cut (a PostgreSQL restart, a network blip): each gateway
      // connects again and reads the registry whole, so a rollback made meanwhile still reaches both.
      const admin_ = new pg.Client({ connectionString: storeUrl });
      await admin_.connect();
      const followers = `SELECT pid FROM pg_stat_activity WHERE application_name = 'rein-registry-follower' AND datname = current_database()`;
      const followerPids = async () => (await admin_.query<{ pid: number }>(followers)).rows.map((r) => r.pid);
      const cut = await until('two followers listening', followerPids, (pids) => pids.length === 2);
      await admin_.query(`SELECT pg_terminate_backend(pid) FROM (${followers}) f`);
      // Gone for good before the rollback, so its announcement cannot reach a connection still dying.
      await until('the cut connections gone', followerPids, (pids) => !pids.some((pid) => cut.includes(pid)));
      await rollback(registry, undefined, { actor: 'test', reason: 'test: while they reconnect' });
      await everywhere('policy-v1');
      await until(
        'two new followers listening',
        followerPids,
        (pids) => pids.length === 2 && !pids.some((pid) => cut.includes(pid)),
      );
      await admin_.end();
      // Both shut down cleanly on SIGTERM; if not, their stderr says why.
      const codes = await Promise.all(gateways.map((g) => g.stop('SIGTERM')));
      expect(codes, gateways.map((g) => g.output().stderr.slice(-4000)).join('\n---\n')).toEqual([0, 0]);
    } finally {
      // Here too when the test failed, without hiding why it did.
      await Promise.all(gateways.map((g) => g.stop('SIGTERM')));
      await registry.close();
      await server.close();
    }
  }, 120_000);
});
