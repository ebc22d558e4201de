import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { stringify } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { startRein } from '../helpers/cli.js';
import { gatewayConfigFile } from '../helpers/gateway.js';
import { freePort } from '../helpers/ports.js';
import { freshPostgresUrl, storeBackends } from '../helpers/postgres.js';
import { startVllmLikeServer } from '../helpers/vllm-like-server.js';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-gateway-crash-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const ADMIN = 'crash-test-admin-key';

// The journal in the gateway's SQLite file, and in PostgreSQL (where several gateways share it); the
// two run at once, each with its own gateway process, backend and folder.
describe.concurrent.each(storeBackends)('gateway durability (journal on %s)', (backend) => {
  it('keeps every call whose response completed when the process is killed with SIGKILL mid-burst', async () => {
    const env = {
      REIN_GATEWAY_ADMIN_KEY: ADMIN,
      REIN_CONFIG: undefined,
      REIN_DATA_DIR: undefined,
      REIN_STORE_URL: backend === 'postgres' ? await freshPostgresUrl() : undefined,
    };
    const dir = mkdtempSync(path.join(scratch, `${backend}-`));
    const server = await startVllmLikeServer({ chunkDelayMs: 1 });
    const port = await freePort();
    const config = path.join(dir, 'rein.yaml');
    // A version whose backend holds its calls: one of them is surely in flight at the kill.
    const file = gatewayConfigFile(server.url, port) as { gateway: { policies: Record<string, unknown> } };
    file.gateway.policies.held = { backend: 'toy', model: 'fault:hold' };
    writeFileSync(config, stringify(file));
    const url = `http://127.0.0.1:${port}`;
    const admin = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${url}${route}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return res.json() as Promise<any>;
    };

    let gateway = startRein(['--config', config, 'gateway'], { cwd: dir, env });
    await gateway.waitFor(/Gateway ready/);
    expect(gateway.output().stdout).toMatch(
      backend === 'postgres'
        ? /Trace store: PostgreSQL postgres:\/\/postgres:\*\*\*@/
        : /Trace store: .*traces\.sqlite/,
    );
    const rollouts = await Promise.all(
      Array.from({ length: 8 }, (_, i) => admin('POST', '/api/rollouts', { id: `burst-${i}` })),
    );
    const clients = rollouts.map((r) => new OpenAI({ apiKey: r.key, baseURL: r.baseUrl, maxRetries: 0 }));

    const completed: Array<{ rollout: string; callId: string; content: string }> = [];
    let killed = false;
    const worker = async (w: number) => {
      for (let i = 0; !killed; i++) {
        const client = clients[w % clients.length] as OpenAI;
        const messages = [{ role: 'user' as const, content: `worker ${w} call ${i}` }];
        try {
          if (i % 2) {
            const { data, response } = await client.chat.completions
              .create({ model: 'production', messages, stream: true })
              .withResponse();
            const parts: string[] = [];
            for await (const chunk of data) parts.push(chunk.choices[0]?.delta.content ?? '');
            completed.push({
              rollout: `burst-${w % clients.length}`,
              callId: response.headers.get('x-rein-call-id') as string,
              content: parts.join(''),
            });
          } else {
            const { data, response } = await client.chat.completions
              .create({ model: 'production', messages })
              .withResponse();
            completed.push({
              rollout: `burst-${w % clients.length}`,
              callId: response.headers.get('x-rein-call-id') as string,
              content: data.choices[0]?.message.content ?? '',
            });
          }
        } catch {
          if (!killed) throw new Error(`call failed before the kill: worker ${w} call ${i}`);
        }
      }
    };
    const workers = Array.from({ length: 16 }, (_, w) => worker(w));
    const heldCall = clients[0]!.chat.completions
      .create({ model: 'held', messages: [{ role: 'user', content: 'held at the kill' }] })
      .catch(() => 'cut off');
    while (completed.length < 150 || server.held() === 0) await new Promise((r) => setTimeout(r, 5));
    killed = true;
    await gateway.stop('SIGKILL');
    await Promise.all(workers);
    expect(await heldCall).toBe('cut off');
    server.release();
    const acknowledged = [...completed];
    expect(acknowledged.length).toBeGreaterThanOrEqual(150);

    gateway = startRein(['--config', config, 'gateway'], { cwd: dir, env });
    await gateway.waitFor(/Gateway ready/);
    try {
      const journaled = new Map<string, { status: string; response: any; promptIds: number[] | null }>();
      for (const r of rollouts) {
        for (const call of (await admin('GET', `/api/rollouts/${r.rollout.id}/calls`)).items)
          journaled.set(call.id, call);
      }
      for (const call of acknowledged) {
        const record = journaled.get(call.callId);
        expect(record, call.callId).toBeDefined();
        expect(record?.status).toBe('ok');
        expect(record?.response.choices[0].message.content).toBe(call.content);
        expect(record?.promptIds?.length).toBeGreaterThan(0);
      }
      // What was cut off in flight is not left in flight: the new gateway ended it as gateway_lost.
      const calls = [...journaled.values()] as Array<{ status: string; errorClass?: string | null }>;
      expect(calls.filter((c) => c.status === 'in_flight')).toEqual([]);
      const lost = calls.filter((c) => c.errorClass === 'gateway_lost');
      expect(lost.length).toBeGreaterThanOrEqual(1); // the held call, at least
      expect(lost.every((c) => c.status === 'error')).toBe(true);
      expect(gateway.output().stdout).toMatch(
        new RegExp(`${lost.length} calls? left in flight by the previous gateway`),
      );
      // The secret survived too: the rollout keys issued before the crash still work.
      const after = await clients[0]!.chat.completions.create({
        model: 'production',
        messages: [{ role: 'user', content: 'after restart' }],
      });
      expect(after.choices[0]?.message.content).toBe('Echo: after restart');
      expect(await gateway.stop('SIGTERM'), gateway.output().stderr.slice(-4000)).toBe(0);
    } finally {
      // Here too when the test failed, without hiding why it did.
      await gateway.stop('SIGTERM');
      await server.close();
    }
  }, 180_000);
});
