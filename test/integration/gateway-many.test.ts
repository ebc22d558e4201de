import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { stringify } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { startRein } from '../helpers/cli.js';
import { gatewayConfigFile } from '../helpers/gateway.js';
import { freePort } from '../helpers/ports.js';
import { freshPostgresUrl } from '../helpers/postgres.js';
import { startVllmLikeServer } from '../helpers/vllm-like-server.js';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-gateway-many-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const ADMIN = 'many-gateways-admin-key';

describe('two rein gateway processes on one PostgreSQL journal', () => {
  it('number the calls of one rollout uniquely and in order, and refuse what the other closed', async () => {
    const server = await startVllmLikeServer();
    const config = path.join(scratch, 'rein.yaml');
    // One config (one data directory: the same rollout-key secret), two ports: two gateways behind one address.
    writeFileSync(config, stringify(gatewayConfigFile(server.url, 1)));
    const env = {
      REIN_GATEWAY_ADMIN_KEY: ADMIN,
      REIN_CONFIG: undefined,
      REIN_DATA_DIR: undefined,
      REIN_STORE_URL: await freshPostgresUrl(),
    };
    const ports = [await freePort(), await freePort()];
    const gateways = ports.map((port) =>
      startRein(['--config', config, 'gateway'], { cwd: scratch, env: { ...env, REIN_GATEWAY_PORT: String(port) } }),
    );
    try {
      await Promise.all(gateways.map((g) => g.waitFor(/Gateway ready/)));
      const [one, two] = ports.map((port) => `http://127.0.0.1:${port}`) as [string, string];
      const admin = async (gateway: string, method: string, route: string, body?: unknown) => {
        const res = await fetch(`${gateway}${route}`, {
          method,
          headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return res.json() as Promise<any>;
      };
      /** The harness's client for a rollout, through gateway one or two. */
      const clientsOf = (created: { key: string; baseUrl: string }) =>
        [one, two].map(
          (gateway) =>
            new OpenAI({ apiKey: created.key, baseURL: created.baseUrl.replace(one, gateway), maxRetries: 0 }),
        ) as [OpenAI, OpenAI];
      const ask = (client: OpenAI, content: string) =>
        client.chat.completions.create({ model: 'production', messages: [{ role: 'user', content }] }).withResponse();

      const created = await admin(one, 'POST', '/api/rollouts', { id: 'shared' });
      const clients = clientsOf(created);
      const answered = await Promise.all(
        Array.from({ length: 24 }, (_, i) => ask(clients[i % 2] as OpenAI, `call ${i}`)),
      );
      const callIds = answered.map((a) => a.response.headers.get('x-rein-call-id'));
      const calls = (await admin(two, 'GET', '/api/rollouts/shared/calls')).items as Array<{
        id: string;
        seq: number;
        status: string;
      }>;
      expect(calls.map((c) => c.seq)).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
      expect(new Set(calls.map((c) => c.id))).toEqual(new Set(callIds));
      expect(calls.every((c) => c.status === 'ok')).toBe(true);

      // Finished through gateway one: gateway two takes no more of its calls.
      await admin(one, 'POST', '/api/rollouts/shared/status', { status: 'succeeded', reason: 'verified' });
      await expect(ask(clients[1], 'after the end')).rejects.toMatchObject({ status: 409, code: 'rollout_finished' });

      // A new attempt started through gateway one supersedes the old attempt's key on gateway two.
      const retried = await admin(one, 'POST', '/api/rollouts', { id: 'retried' });
      await ask(clientsOf(retried)[1], 'first attempt');
      expect(await admin(one, 'POST', '/api/rollouts/retried/attempts', {})).toMatchObject({
        rollout: { attempts: 2 },
      });
      await expect(ask(clientsOf(retried)[1], 'stale attempt')).rejects.toMatchObject({
        status: 409,
        code: 'attempt_superseded',
      });
      // Both shut down cleanly on SIGTERM; if not, their stderr says why.
      const codes = await Promise.all(gateways.map((g) => g.stop('SIGTERM')));
      expect(codes, gateways.map((g) => g.output().stderr.slice(-4000)).join('\n---\n')).toEqual([0, 0]);
    } finally {
      // Here too when the test failed, without hiding why it did.
      await Promise.all(gateways.map((g) => g.stop('SIGTERM')));
      await server.close();
    }
  }, 120_000);
});
