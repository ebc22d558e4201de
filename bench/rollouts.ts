/**
 * The local runner's own cost: a no-op harness and a no-op verifier (`/bin/sh -c` one-liners)
 * run through the real runner and gateway control API, at several concurrencies. The baseline,
 * measured in the same run, spawns the same two processes per rollout directly with the same
 * concurrency: what launching costs with no runner at all. The difference per rollout is the
 * runner's overhead (rollout creation, status and reward writes over HTTP, files, log capture).
 *
 *   npm run bench:rollouts [-- --rollouts 200]
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { GatewayControlClient } from '../src/gateway/control-client.js';
import { sha256Hex } from '../src/gateway/keys.js';
import { startGateway } from '../src/gateway/server.js';
import { localExecutor, type ProgramSpec } from '../src/rollouts/local-executor.js';
import { runRollouts } from '../src/rollouts/runner.js';
import { SqliteTraceStore } from '../src/store/sqlite-store.js';

const { values } = parseArgs({ options: { rollouts: { type: 'string', default: '200' } } });
const count = Number(values.rollouts);
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-bench-rollouts-'));
const store = new SqliteTraceStore(path.join(dir, 'traces.sqlite'));
const adminKey = randomBytes(16).toString('hex');
const gateway = await startGateway(
  {
    store,
    routing: { backends: { none: { endpoints: ['http://127.0.0.1:9/v1'], tokenIds: true, logprobs: true } }, policies: { v0: { backend: 'none', model: 'v0' } }, aliases: {} },
    secret: randomBytes(32),
    adminKeyHash: sha256Hex(adminKey),
  },
  { host: '127.0.0.1', port: 0 },
);
const control = new GatewayControlClient(gateway.url, adminKey);
const harness: ProgramSpec = { command: '/bin/sh', args: ['-c', 'echo "{\\"answer\\": 1}" > "$1"', 'harness', '{output}'], timeoutMs: 30_000 };
const verifier: ProgramSpec = { command: '/bin/sh', args: ['-c', 'echo "{\\"components\\": {\\"success\\": 1}}"'], timeoutMs: 30_000 };

function spawnOnce(spec: ProgramSpec, output: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(spec.command, spec.args.map((a) => a.replace('{output}', output)), { stdio: 'ignore' });
    child.on('error', reject);
    child.on('close', () => resolve());
  });
}

async function direct(concurrency: number): Promise<number> {
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        await spawnOnce(harness, path.join(dir, `direct-${concurrency}-${i}.json`));
        await spawnOnce(verifier, '');
      }
    }),
  );
  return (performance.now() - t0) / 1000;
}

async function runner(concurrency: number): Promise<number> {
  const t0 = performance.now();
  const tasks = Array.from({ length: count }, (_, i) => ({ id: `t${i}` }));
  const outcomes = await runRollouts(
    { batchId: `bench-c${concurrency}`, tasks, samplesPerTask: 1, mode: 'eval', policyVersion: 'v0', hiddenFields: [], rewardWeights: { success: 1 }, concurrency, maxAttempts: 1, workDir: path.join(dir, 'work') },
    { gateway: control, harness: localExecutor(harness), verifier },
  );
  if (outcomes.some((o) => o.status !== 'succeeded')) throw new Error(`a no-op rollout failed: ${JSON.stringify(outcomes.find((o) => o.status !== 'succeeded'))}`);
  return (performance.now() - t0) / 1000;
}

const rows = [];
for (const concurrency of [1, 8, 32]) {
  const baseline = await direct(concurrency);
  const measured = await runner(concurrency);
  rows.push({
    concurrency,
    rollouts: count,
    directPerSecond: +(count / baseline).toFixed(1),
    runnerPerSecond: +(count / measured).toFixed(1),
    ratioVsDirect: +(baseline / measured).toFixed(2),
    overheadMsPerRollout: +((1000 * (measured - baseline)) / count).toFixed(2),
  });
}
console.log(JSON.stringify({ cpus: os.cpus().length, node: process.version, rows }, null, 2));
await gateway.close();
await store.close();
rmSync(dir, { recursive: true, force: true });
