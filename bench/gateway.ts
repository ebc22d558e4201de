/**
 * Gateway overhead: latency (p50, p99) and throughput of calls through the gateway versus straight
 * to the same upstream, measured in one run, streaming and not, at several concurrencies, with
 * the journal on. Also the journal's bytes per call for a long multi-turn rollout.
 *
 *   npm run bench:gateway [-- --quick]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { stringify } from 'yaml';
import { SqliteTraceStore } from '../src/store/sqlite-store.js';
import { gatewayConfigFile } from '../test/helpers/gateway.js';
import { freePort } from '../test/helpers/ports.js';
import { MODEL } from '../test/helpers/vllm-like-server.js';

const quick = process.argv.includes('--quick');
const root = path.resolve(import.meta.dirname, '..');
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const ADMIN = 'bench-admin-key';

function start(args: string[], env: NodeJS.ProcessEnv, ready: RegExp): Promise<{ child: ChildProcess; output: string }> {
  const child = spawn(process.execPath, ['--import', tsx, ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout?.on('data', (d: Buffer) => {
      output += d.toString();
      if (ready.test(output)) resolve({ child, output });
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

interface Target {
  pool: Pool;
  path: string;
  headers: Record<string, string>;
  model: string;
}

async function call(target: Target, stream: boolean, i: number): Promise<number> {
  const body = JSON.stringify({
    model: target.model,
    stream,
    messages: [
      { role: 'system', content: 'You are a careful assistant. '.repeat(60) },
      { role: 'user', content: `question number ${i}: what is the capital of France?` },
    ],
  });
  const t0 = performance.now();
  const res = await target.pool.request({ method: 'POST', path: target.path, headers: { 'content-type': 'application/json', ...target.headers }, body });
  const text = await res.body.text();
  if (res.statusCode !== 200 || (stream && !text.includes('[DONE]'))) throw new Error(`status ${res.statusCode}: ${text.slice(0, 200)}`);
  return performance.now() - t0;
}

async function load(target: Target, stream: boolean, concurrency: number, total: number) {
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) latencies.push(await call(target, stream, next++));
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] as number;
  return { p50: at(0.5), p99: at(0.99), rps: total / seconds };
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-bench-gateway-'));
const upstream = await start(['bench/upstream.ts'], {}, /\/v1\n/);
const upstreamUrl = upstream.output.trim();
const port = await freePort();
writeFileSync(path.join(dir, 'rein.yaml'), stringify(gatewayConfigFile(upstreamUrl, port)));
const gateway = await start(['src/cli/cli.ts', '--config', path.join(dir, 'rein.yaml'), 'gateway'], { REIN_GATEWAY_ADMIN_KEY: ADMIN }, /Gateway ready/);
const gatewayUrl = `http://127.0.0.1:${port}`;
const bare = await start(['bench/bare-proxy.ts', upstreamUrl], {}, /\n/);
const bareUrl = bare.output.trim();

async function admin(route: string, body: unknown): Promise<any> {
  const res = await fetch(`${gatewayUrl}${route}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return res.json();
}

try {
  const rollout = await admin('/api/rollouts', { id: 'bench' });
  const direct: Target = {
    pool: new Pool(new URL(upstreamUrl).origin, { connections: 512 }),
    path: '/v1/chat/completions',
    headers: {},
    model: MODEL,
  };
  const viaGateway: Target = {
    pool: new Pool(gatewayUrl, { connections: 512 }),
    path: '/v1/chat/completions',
    headers: { authorization: `Bearer ${rollout.key}` },
    model: 'production',
  };
  const bareProxy: Target = { ...direct, pool: new Pool(bareUrl, { connections: 512 }) };
  const scale = quick ? 0.2 : 1;
  const scenarios = [
    { concurrency: 1, total: Math.round(600 * scale) },
    { concurrency: 64, total: Math.round(3000 * scale) },
    { concurrency: 256, total: Math.round(4000 * scale) },
  ];
  const rows: string[] = [];
  for (const stream of [false, true]) {
    for (const { concurrency, total } of scenarios) {
      for (const target of [direct, bareProxy, viaGateway]) await load(target, stream, Math.min(concurrency, 16), 100); // warm-up
      const d = await load(direct, stream, concurrency, total);
      const b = await load(bareProxy, stream, concurrency, total);
      const g = await load(viaGateway, stream, concurrency, total);
      const ms = (x: number) => x.toFixed(2);
      rows.push(
        `| ${stream ? 'stream' : 'non-stream'} | ${concurrency} | ${total} | ${ms(d.p50)} / ${ms(b.p50)} / ${ms(g.p50)} | ${ms(g.p50 - d.p50)} | ${ms(g.p50 - b.p50)} | ` +
          `${ms(d.p99)} / ${ms(b.p99)} / ${ms(g.p99)} | ${ms(g.p99 - d.p99)} | ${ms(g.p99 - b.p99)} | ${d.rps.toFixed(0)} / ${b.rps.toFixed(0)} / ${g.rps.toFixed(0)} | ${(g.rps / d.rps).toFixed(2)} | ${(g.rps / b.rps).toFixed(2)} |`,
      );
      process.stderr.write(`${rows.at(-1)}\n`);
    }
  }

  // A long multi-turn rollout: each turn resends the whole conversation plus a tool result.
  const turns = 100;
  const long = await admin('/api/rollouts', { id: 'long-rollout' });
  const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: 'You solve tasks with tools. '.repeat(20) }];
  for (let t = 0; t < turns; t++) {
    messages.push({ role: 'user', content: `tool result for step ${t}: ${'x'.repeat(200)}` });
    const res = await fetch(`${gatewayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${long.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'production', messages }),
    });
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    messages.push({ role: 'assistant', content: body.choices[0]?.message.content ?? '' });
  }
  const store = new SqliteTraceStore(path.join(dir, 'data', 'traces.sqlite'));
  const calls = await store.listCalls('long-rollout');
  const { bytes } = await store.rolloutFootprint('long-rollout');
  const tokenBytesIfWhole = calls.reduce((s, c) => s + (c.promptIds?.length ?? 0) * 4, 0);
  const lastPromptTokens = calls.at(-1)?.promptIds?.length ?? 0;
  await store.close();

  console.log(`\nGateway vs direct, ${os.cpus().length} cores, journal on (SQLite WAL). Latency in ms.\n`);
  console.log('Each cell: direct / bare proxy hop / Rein gateway. "vs direct" is what a harness pays; "vs hop" is what the gateway adds over the cheapest possible proxy.\n');
  console.log('| mode | concurrency | calls | p50 ms | added p50 vs direct | added p50 vs hop | p99 ms | added p99 vs direct | added p99 vs hop | req/s | rps ratio vs direct | rps ratio vs hop |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const row of rows) console.log(row);
  console.log(
    `\nJournal for a ${turns}-turn rollout (last prompt ${lastPromptTokens} tokens): ${(bytes / turns / 1024).toFixed(1)} KiB per call in all ` +
      `(requests as received and as sent, response, token ids, log-probs); the prompt token ids alone, stored whole, ` +
      `would take ${(tokenBytesIfWhole / turns / 1024).toFixed(1)} KiB per call.`,
  );
} finally {
  gateway.child.kill('SIGTERM');
  bare.child.kill('SIGTERM');
  upstream.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 500));
  rmSync(dir, { recursive: true, force: true });
}
