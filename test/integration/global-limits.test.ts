import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayControlClient } from '../../src/gateway/control-client.js';
import { sha256Hex } from '../../src/gateway/keys.js';
import type { RoutingTable } from '../../src/gateway/routing.js';
import { startGateway, type Gateway } from '../../src/gateway/server.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import { runRollouts, type RolloutBatchSpec } from '../../src/rollouts/runner.js';
import { PostgresTraceStore } from '../../src/store/postgres-store.js';
import type { SqlTraceStore } from '../../src/store/journal-store.js';
import { freshPostgresUrl } from '../helpers/postgres.js';

const ADMIN_KEY = 'admin-key-for-limits';
const fixtures = path.resolve(import.meta.dirname, '../fixtures/harnesses');

/** A stand-in inference server: answers each chat call once its gate opens, counting the most it held at once. */
async function startCountingBackend() {
  let inFlight = 0;
  let gate: Promise<void> = Promise.resolve();
  const stats = { maxInFlight: 0, answered: 0, inFlight: () => inFlight };
  const answer = async (res: http.ServerResponse) => {
    stats.maxInFlight = Math.max(stats.maxInFlight, ++inFlight);
    // A moment in flight even with the gate open, so calls overlap.
    await Promise.all([gate, new Promise((resolve) => setTimeout(resolve, 20))]);
    inFlight--;
    stats.answered++;
    res.setHeader('content-type', 'application/json');
    res.end(
      JSON.stringify({
        id: 'chatcmpl-1',
        object: 'chat.completion',
        created: 0,
        model: 'toy',
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      }),
    );
  };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => void answer(res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    stats,
    /** Holds every call until the returned function runs. */
    hold: () => {
      let open!: () => void;
      gate = new Promise((resolve) => (open = resolve));
      return open;
    },
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

const routing = (url: string): RoutingTable => ({
  backends: {
    wide: { endpoints: [url], tokenIds: false, logprobs: false, limit: { maxInFlight: 3, maxQueueWaitMs: 60_000 } },
    tight: { endpoints: [url], tokenIds: false, logprobs: false, limit: { maxInFlight: 2, maxQueueWaitMs: 300 } },
  },
  policies: { 'v-wide': { backend: 'wide', model: 'toy' }, 'v-tight': { backend: 'tight', model: 'toy' } },
  aliases: {},
});

let backend: Awaited<ReturnType<typeof startCountingBackend>>;
const stores: SqlTraceStore[] = [];
const gateways: Gateway[] = [];
let workDir: string;
let storeUrl: string;
const secret = randomBytes(32);

/** Another gateway on the shared PostgreSQL journal, as behind a load balancer: same secret, same admin key. */
async function addGateway(name: string): Promise<Gateway> {
  const store = await PostgresTraceStore.open(storeUrl, { gateway: name });
  stores.push(store);
  const gateway = await startGateway(
    {
      store,
      routing: routing(backend.url),
      secret,
      adminKeyHash: sha256Hex(ADMIN_KEY),
      markLostCalls: false,
      // A time to live well past any event-loop stall of a loaded CI machine: a gateway stalled past it is
      // counted dead and its share taken while its own calls are still in flight (docs/scale-out.md).
      membershipTiming: { heartbeatMs: 50, memberTtlMs: 5000 },
    },
    { host: '127.0.0.1', port: 0 },
  );
  gateways.push(gateway);
  return gateway;
}

beforeAll(async () => {
  backend = await startCountingBackend();
  workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-limits-'));
  storeUrl = await freshPostgresUrl();
  await addGateway('a');
  await addGateway('b');
});
afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  for (const store of stores) await store.close();
  await backend.close();
  rmSync(workDir, { recursive: true, force: true });
});

/** A harness's client on gateway `g`, for a new rollout pinned to `version`. */
async function harnessClient(g: number, id: string, version: string): Promise<OpenAI> {
  const control = new GatewayControlClient(gateways[g]!.url, ADMIN_KEY);
  const issued = await control.createRollout({ id, policyVersion: version });
  return new OpenAI({ apiKey: issued.key, baseURL: issued.baseUrl, maxRetries: 0 });
}

/** The rollout's pinned version is what the harness asks for (a model the gateway routes). */
const ask = (client: OpenAI, model: string) =>
  client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });

describe('a backend limit across gateways sharing a store', () => {
  it('keeps calls in flight to the backend within maxInFlight, queueing the rest until each is answered', async () => {
    const clients = await Promise.all(Array.from({ length: 4 }, (_, i) => harnessClient(i % 2, `wide-${i}`, 'v-wide')));
    const replies = await Promise.all(
      clients.flatMap((client) => Array.from({ length: 4 }, () => ask(client, 'v-wide'))),
    );
    expect(replies.map((r) => r.choices[0]?.message.content)).toEqual(Array(16).fill('ok'));
    expect(backend.stats.maxInFlight).toBeLessThanOrEqual(3);
    expect(backend.stats.maxInFlight).toBeGreaterThan(0);
  });

  it('keeps within the limit while a third gateway joins with calls in flight, then leaves', async () => {
    backend.stats.maxInFlight = 0;
    const open = backend.hold();
    const clients = await Promise.all(Array.from({ length: 4 }, (_, i) => harnessClient(i % 2, `join-${i}`, 'v-wide')));
    const replies = clients.flatMap((client) => Array.from({ length: 3 }, () => ask(client, 'v-wide')));
    // The two hold all 3 slots (shares 2 and 1) when the third joins: its share of 1 waits until one drains.
    while (backend.stats.inFlight() < 3) await new Promise((resolve) => setTimeout(resolve, 10));
    const third = await addGateway('c');
    const joined = await harnessClient(2, 'join-c', 'v-wide');
    replies.push(...Array.from({ length: 3 }, () => ask(joined, 'v-wide')));
    open();
    expect((await Promise.all(replies)).map((r) => r.choices[0]?.message.content)).toEqual(Array(15).fill('ok'));
    await third.close();
    gateways.pop();
    // The two left take its share back: calls go on.
    expect((await ask(clients[0]!, 'v-wide')).choices[0]?.message.content).toBe('ok');
    expect(backend.stats.maxInFlight).toBe(3);
  });

  it("refuses a call that waited its longest with 429, naming the limit and its keys, journaled as Rein's fault", async () => {
    const before = backend.stats.answered;
    const open = backend.hold();
    const client = await harnessClient(0, 'tight-0', 'v-tight');
    // This gateway's share of 2 among 2 is 1: the first call holds it, the second waits 300 ms and is refused.
    const first = ask(client, 'v-tight');
    while (backend.stats.inFlight() === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    const refused = await ask(client, 'v-tight').catch((err: unknown) => err);
    open();
    expect((await first).choices[0]?.message.content).toBe('ok');
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(429);
    expect((refused as Error).message).toMatch(
      /backend tight is at its limit of 2 calls in flight across all gateways/,
    );
    expect((refused as Error).message).toMatch(/gateway\.backends\.tight\.maxInFlight.*maxQueueWaitSeconds/);
    expect(backend.stats.answered).toBe(before + 1);
    const calls = await stores[0]!.listCalls('tight-0');
    expect(calls.map((c) => c.errorClass)).toEqual(expect.arrayContaining([null, 'policy_unavailable']));
  });
});

describe('a harness limit across workers', () => {
  const spec = (batchId: string, overrides: Partial<RolloutBatchSpec> = {}): RolloutBatchSpec => ({
    batchId,
    tasks: Array.from({ length: 3 }, (_, i) => ({ id: `t${i}`, score: 1 })),
    samplesPerTask: 1,
    mode: 'eval',
    policyVersion: 'v-wide',
    hiddenFields: [],
    rewardWeights: { success: 1 },
    concurrency: 4,
    maxAttempts: 1,
    workDir,
    harnessVersion: 'h-limited',
    maxRunning: 2,
    ...overrides,
  });
  const deps = (g: number, runningDir: string) => ({
    gateway: new GatewayControlClient(gateways[g]!.url, ADMIN_KEY),
    harness: localExecutor({
      command: process.execPath,
      args: [path.join(fixtures, 'running-count.mjs')],
      env: { RUNNING_DIR: runningDir },
      timeoutMs: 20_000,
    }),
    verifier: { command: process.execPath, args: [path.join(fixtures, 'score.mjs'), '{task}'], timeoutMs: 20_000 },
  });

  it('runs at most harness.maxRunning of a kind at once over two runners on two gateways', async () => {
    const running = path.join(workDir, 'running');
    mkdirSync(running);
    // Two workers, each allowed 4 at once, through different gateways: together they hold 2.
    const [a, b] = await Promise.all([
      runRollouts(spec('slots-a'), deps(0, running)),
      runRollouts(spec('slots-b'), deps(1, running)),
    ]);
    expect([...a, ...b].map((o) => o.status)).toEqual(Array(6).fill('succeeded'));
    const seen = readFileSync(`${running}.log`, 'utf8').trim().split('\n').map(Number);
    expect(seen).toHaveLength(6);
    expect(Math.max(...seen)).toBeLessThanOrEqual(2);
  });

  it("takes a dead worker's slot back once its lease expires", async () => {
    const control = new GatewayControlClient(gateways[1]!.url, ADMIN_KEY);
    const request = { kind: 'h-reclaimed', holder: 'dead-worker', limit: 1, ttlMs: 300 };
    // A worker takes the only slot and dies: it never renews or releases.
    expect((await control.takeLaunchSlot(request)).leaseId).not.toBeNull();
    expect(await control.takeLaunchSlot({ ...request, holder: 'other' })).toEqual({ leaseId: null, running: 1 });
    const running = path.join(workDir, 'reclaimed');
    mkdirSync(running);
    const waits: Array<string | null> = [];
    const outcomes = await runRollouts(
      spec('reclaimed', { tasks: [{ id: 'only', score: 1 }], harnessVersion: 'h-reclaimed', maxRunning: 1 }),
      { ...deps(0, running), onWaiting: (problem) => waits.push(problem) },
    );
    expect(outcomes.map((o) => o.status)).toEqual(['succeeded']);
    expect(waits[0]).toMatch(/all 1 launch slots of harness h-reclaimed are taken .*harness\.maxRunning/);
    expect(waits.at(-1)).toBeNull();
  });
});
