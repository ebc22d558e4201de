/**
 * What the gateway benchmarks share: a vLLM-shaped upstream, `rein gateway` in front of it and a
 * bare proxy hop beside it (each its own process), targets to load, and the load generator.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { stringify } from 'yaml';
import { gatewayConfigFile } from '../test/helpers/gateway.js';
import { freePort } from '../test/helpers/ports.js';
import { MODEL } from '../test/helpers/vllm-like-server.js';

export const root = path.resolve(import.meta.dirname, '..');
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const ADMIN = 'bench-admin-key';

/** Runs a script of this checkout (TypeScript through tsx) or a compiled one (.js) as its own process. */
function start(
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  nodeArgs: string[] = [],
  cwd = root,
): Promise<{ child: ChildProcess; output: string }> {
  const loader = args[0]?.endsWith('.ts') ? ['--import', tsx] : [];
  const child = spawn(process.execPath, [...nodeArgs, ...loader, ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout?.on('data', (d: Buffer) => {
      output += d.toString();
      if (ready.test(output)) resolve({ child, output });
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

export interface Target {
  /** One pool, or several that callers take in turn (gateways behind one address, as a load balancer spreads them). */
  pool: Pool | Pool[];
  headers: Record<string, string>;
  model: string;
  /** Keys of rollouts that callers take in turn (caller i uses key i mod n), instead of the one in `headers`. */
  rolloutKeys?: string[];
}

export interface GatewayBench {
  dir: string;
  upstreamUrl: string;
  gatewayUrl: string;
  /** Straight to the upstream, through the bare hop, and through the gateway (rollout `bench`). */
  direct: Target;
  hop: Target;
  viaGateway: Target;
  /** Through a second gateway run from another checkout (`beforeTree`), on the same upstream. */
  viaBefore?: Target;
  /** A control-API call with the admin key. */
  admin(route: string, body: unknown): Promise<any>;
  /** Stops the three processes (the gateway with SIGTERM, so a CPU profile is written) and removes the folder. */
  stop(): Promise<void>;
}

const compiled = new Map<string, string>();

/**
 * The CLI of the checkout at `tree`, compiled as `npm run build` compiles it, once per run: users
 * run the compiled gateway, and tsx's transform adds a helper call to every closure it names,
 * a cost that falls unevenly on the code being compared.
 */
function compiledCli(tree: string): string {
  let cli = compiled.get(tree);
  if (!cli) {
    const outDir = path.join(tree, '.bench', 'dist');
    rmSync(outDir, { recursive: true, force: true });
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    execFileSync(process.execPath, [tsc, '-p', path.join(tree, 'tsconfig.build.json'), '--outDir', outDir], {
      stdio: 'inherit',
    });
    cli = path.join(outDir, 'src', 'cli', 'cli.js');
    compiled.set(tree, cli);
  }
  return cli;
}

/**
 * `rein gateway` (compiled) from the checkout at `tree` in front of `upstreamUrl`, its data under `dir`.
 * `options.storeUrl`: its journal in that PostgreSQL database; `options.secretFile`: the rollout-key
 * secret, shared by gateways that must accept each other's keys.
 */
export async function startGateway(
  tree: string,
  dir: string,
  upstreamUrl: string,
  nodeArgs: string[] = [],
  options: { storeUrl?: string; secretFile?: string } = {},
) {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const config = gatewayConfigFile(upstreamUrl, port) as { gateway: Record<string, unknown> };
  if (options.secretFile) config.gateway.secretFile = options.secretFile;
  writeFileSync(path.join(dir, 'rein.yaml'), stringify(config));
  const env = { REIN_GATEWAY_ADMIN_KEY: ADMIN, ...(options.storeUrl && { REIN_STORE_URL: options.storeUrl }) };
  const gateway = await start(
    [compiledCli(tree), '--config', path.join(dir, 'rein.yaml'), 'gateway'],
    env,
    /Gateway ready/,
    nodeArgs,
    tree,
  );
  const url = `http://127.0.0.1:${port}`;
  const admin = async (route: string, body: unknown): Promise<any> => {
    const res = await fetch(`${url}${route}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return res.json();
  };
  const rollout = (await admin('/api/rollouts', { id: 'bench' })) as { key: string };
  const target: Target = {
    pool: new Pool(url, { connections: 512 }),
    headers: { authorization: `Bearer ${rollout.key}` },
    model: 'production',
  };
  return { child: gateway.child, url, admin, target };
}

/**
 * @param options.beforeTree another checkout of Rein (see checkoutBefore in before.ts) whose gateway runs beside
 *   this one, for before/after numbers from one run
 */
export async function startGatewayBench(
  options: { gatewayNodeArgs?: string[]; beforeTree?: string } = {},
): Promise<GatewayBench> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-bench-gateway-'));
  const upstream = await start(['bench/upstream.ts'], {}, /\/v1\n/);
  const upstreamUrl = upstream.output.trim();
  const gateway = await startGateway(root, dir, upstreamUrl, options.gatewayNodeArgs);
  const before = options.beforeTree
    ? await startGateway(options.beforeTree, path.join(dir, 'before'), upstreamUrl)
    : undefined;
  const gatewayUrl = gateway.url;
  const admin = gateway.admin;
  const bare = await start(['bench/bare-proxy.ts', upstreamUrl], {}, /\n/);
  const direct: Target = {
    pool: new Pool(new URL(upstreamUrl).origin, { connections: 512 }),
    headers: {},
    model: MODEL,
  };
  return {
    dir,
    upstreamUrl,
    gatewayUrl,
    direct,
    hop: { ...direct, pool: new Pool(bare.output.trim(), { connections: 512 }) },
    viaGateway: gateway.target,
    viaBefore: before?.target,
    admin,
    async stop() {
      const exited = new Promise((r) => gateway.child.once('exit', r));
      gateway.child.kill('SIGTERM');
      before?.child.kill('SIGTERM');
      bare.child.kill('SIGTERM');
      upstream.child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function call(target: Target, stream: boolean, i: number, caller: number): Promise<number> {
  const body = JSON.stringify({
    model: target.model,
    stream,
    messages: [
      { role: 'system', content: 'You are a careful assistant. '.repeat(60) },
      { role: 'user', content: `question number ${i}: what is the capital of France?` },
    ],
  });
  const t0 = performance.now();
  const pool = Array.isArray(target.pool) ? (target.pool[i % target.pool.length] as Pool) : target.pool;
  const key = target.rolloutKeys?.[caller % target.rolloutKeys.length];
  const headers = {
    'content-type': 'application/json',
    ...target.headers,
    ...(key && { authorization: `Bearer ${key}` }),
  };
  const res = await pool.request({ method: 'POST', path: '/v1/chat/completions', headers, body });
  const text = await res.body.text();
  if (res.statusCode !== 200 || (stream && !text.includes('[DONE]')))
    throw new Error(`status ${res.statusCode}: ${text.slice(0, 200)}`);
  return performance.now() - t0;
}

/** `total` calls from `concurrency` callers: latency p50 and p99 (ms) and throughput. */
export async function load(
  target: Target,
  stream: boolean,
  concurrency: number,
  total: number,
): Promise<{ p50: number; p99: number; rps: number }> {
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, caller) => {
      while (next < total) latencies.push(await call(target, stream, next++, caller));
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] as number;
  return { p50: at(0.5), p99: at(0.99), rps: total / seconds };
}
