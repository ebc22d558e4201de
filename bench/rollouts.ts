/**
 * The local runner's own cost: a no-op harness and a no-op verifier (`/bin/sh -c` one-liners)
 * run through the real runner and gateway control API, at several concurrencies. The baseline,
 * measured in the same run, spawns the same two processes per rollout directly with the same
 * concurrency: what launching costs with no runner at all. The difference per rollout is the
 * runner's overhead (rollout creation, status and reward writes over HTTP, files, log capture).
 *
 * With `--executor kubernetes`: the same no-op rollouts as Kubernetes Jobs from the example's
 * job.yaml, through a real kube-apiserver and Job controller (test/helpers/kube-control-plane.ts,
 * built by scripts/build-kube.sh) with the node agent running the pods, the worker holding the
 * example's Role; the baseline is the local-process executor in the same run. Per harness run:
 * time to running (the executor asked to run it → the harness's first instruction, stamped by
 * the harness itself), the launch rate (runs started per second) and rollouts per second.
 *
 *   npm run bench:rollouts [-- --rollouts 200] [--executor local|kubernetes]
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { GatewayControlClient } from '../src/gateway/control-client.js';
import { sha256Hex } from '../src/gateway/keys.js';
import { startGateway } from '../src/gateway/server.js';
import type { HarnessExecutor } from '../src/rollouts/executor.js';
import { kubernetesExecutor } from '../src/rollouts/kubernetes/job-executor.js';
import { kubernetesHarnessSchema } from '../src/rollouts/kubernetes/job-template.js';
import { localExecutor } from '../src/rollouts/local-executor.js';
import type { ProgramSpec } from '../src/rollouts/program.js';
import { runRollouts } from '../src/rollouts/runner.js';
import { SqliteTraceStore } from '../src/store/sqlite-store.js';
import { startKubeControlPlane } from '../test/helpers/kube-control-plane.js';
import { startNodeAgent } from '../test/helpers/node-agent/node-agent.js';

const { values } = parseArgs({
  options: { rollouts: { type: 'string', default: '200' }, executor: { type: 'string', default: 'local' } },
});
const count = Number(values.rollouts);
const loadAtStart = os.loadavg();
if (!Number.isInteger(count) || count < 1)
  throw new Error(`--rollouts ${values.rollouts}: expected a positive integer`);
if (values.executor !== 'local' && values.executor !== 'kubernetes')
  throw new Error(`--executor ${values.executor}: expected local or kubernetes`);
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-bench-rollouts-'));
const store = new SqliteTraceStore(path.join(dir, 'traces.sqlite'));
const adminKey = randomBytes(16).toString('hex');
const gateway = await startGateway(
  {
    store,
    routing: {
      backends: { none: { endpoints: ['http://127.0.0.1:9/v1'], tokenIds: true, logprobs: true } },
      policies: { v0: { backend: 'none', model: 'v0' } },
      aliases: {},
    },
    secret: randomBytes(32),
    adminKeyHash: sha256Hex(adminKey),
  },
  { host: '127.0.0.1', port: 0 },
);
const control = new GatewayControlClient(gateway.url, adminKey);
const harness: ProgramSpec = {
  command: '/bin/sh',
  args: ['-c', 'echo "{\\"answer\\": 1}" > "$1"', 'harness', '{output}'],
  timeoutMs: 30_000,
};
const verifier: ProgramSpec = {
  command: '/bin/sh',
  args: ['-c', 'echo "{\\"components\\": {\\"success\\": 1}}"'],
  timeoutMs: 30_000,
};

function spawnOnce(spec: ProgramSpec, output: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      spec.command,
      spec.args.map((a) => a.replace('{output}', output)),
      { stdio: 'ignore' },
    );
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
    {
      batchId: `bench-c${concurrency}`,
      tasks,
      samplesPerTask: 1,
      mode: 'eval',
      policyVersion: 'v0',
      hiddenFields: [],
      rewardWeights: { success: 1 },
      concurrency,
      maxAttempts: 1,
      workDir: path.join(dir, 'work'),
    },
    { gateway: control, harness: localExecutor(harness), verifier },
  );
  if (outcomes.some((o) => o.status !== 'succeeded'))
    throw new Error(`a no-op rollout failed: ${JSON.stringify(outcomes.find((o) => o.status !== 'succeeded'))}`);
  return (performance.now() - t0) / 1000;
}

/** What each harness run writes as its output: the moment it started, by its own clock (this machine's). */
const STAMP = 'echo "{\\"answer\\": 1, \\"startedAtMs\\": $(date +%s%3N)}"';
const stampingHarness: ProgramSpec = {
  command: '/bin/sh',
  args: ['-c', `${STAMP} > "$1"`, 'harness', '{output}'],
  timeoutMs: 30_000,
};

interface Timed {
  rolloutsPerSecond: number;
  /** Harness runs started per second: from the first launch to the last start. */
  launchesPerSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/**
 * Runs `count` no-op rollouts through the runner on `executor`, timing each from launch to the harness's own start
 * stamp.
 */
async function timedRunner(executor: HarnessExecutor, name: string, concurrency: number): Promise<Timed> {
  const launched: number[] = [];
  const started: number[] = [];
  const timing: HarnessExecutor = {
    problems: () => executor.problems(),
    async run(launch) {
      const at = Date.now();
      const run = await executor.run(launch);
      launched.push(at);
      started.push((JSON.parse(readFileSync(launch.outputFile, 'utf8')) as { startedAtMs: number }).startedAtMs);
      return run;
    },
  };
  const t0 = performance.now();
  const tasks = Array.from({ length: count }, (_, i) => ({ id: `t${i}` }));
  const outcomes = await runRollouts(
    {
      batchId: `bench-${name}-c${concurrency}`,
      tasks,
      samplesPerTask: 1,
      mode: 'eval',
      policyVersion: 'v0',
      hiddenFields: [],
      rewardWeights: { success: 1 },
      concurrency,
      maxAttempts: 1,
      workDir: path.join(dir, 'work'),
    },
    { gateway: control, harness: timing, verifier },
  );
  const seconds = (performance.now() - t0) / 1000;
  if (outcomes.some((o) => o.status !== 'succeeded'))
    throw new Error(
      `a no-op rollout failed on ${name}: ${JSON.stringify(outcomes.find((o) => o.status !== 'succeeded'))}`,
    );
  const latencies = started.map((s, i) => s - (launched[i] as number)).sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] as number;
  return {
    rolloutsPerSecond: count / seconds,
    launchesPerSecond: count / ((Math.max(...started) - Math.min(...launched)) / 1000),
    p50Ms: at(0.5),
    p99Ms: at(0.99),
  };
}

const round = (x: number, digits = 1) => +x.toFixed(digits);

async function localRows() {
  const rows = [];
  for (const concurrency of [1, 8, 32]) {
    const baseline = await direct(concurrency);
    const measured = await runner(concurrency);
    rows.push({
      concurrency,
      rollouts: count,
      directPerSecond: round(count / baseline),
      runnerPerSecond: round(count / measured),
      ratioVsDirect: round(baseline / measured, 2),
      overheadMsPerRollout: round((1000 * (measured - baseline)) / count, 2),
    });
  }
  return rows;
}

async function kubernetesRows() {
  const image = 'rein-bench/noop:1';
  const kubeDir = path.resolve(import.meta.dirname, '../examples/calculator-agent/kubernetes');
  const plane = await startKubeControlPlane();
  const agent = await startNodeAgent(plane, {
    images: { [image]: { entrypoint: ['/bin/sh', '-c', `${STAMP} > "$REIN_OUTPUT_FILE"`] } },
  });
  try {
    await plane.createFromYaml(readFileSync(path.join(kubeDir, 'rbac.yaml'), 'utf8'));
    const kubeConfig = await plane.kubeConfigForServiceAccount('rein-rollouts', 'rein-worker');
    const settings = kubernetesHarnessSchema.parse({
      template: path.join(kubeDir, 'job.yaml'),
      image,
      namespace: 'rein-rollouts',
    });
    const rows = [];
    for (const concurrency of [1, 8, 32]) {
      const local = await timedRunner(localExecutor(stampingHarness), 'local', concurrency);
      const jobs = kubernetesExecutor(settings, { kubeConfig });
      const kube = await timedRunner(jobs, 'kubernetes', concurrency).finally(() => jobs.close?.());
      rows.push({
        concurrency,
        rollouts: count,
        local: {
          rolloutsPerSecond: round(local.rolloutsPerSecond),
          launchesPerSecond: round(local.launchesPerSecond),
          timeToRunningP50Ms: round(local.p50Ms),
          timeToRunningP99Ms: round(local.p99Ms),
        },
        kubernetes: {
          rolloutsPerSecond: round(kube.rolloutsPerSecond),
          launchesPerSecond: round(kube.launchesPerSecond),
          timeToRunningP50Ms: round(kube.p50Ms),
          timeToRunningP99Ms: round(kube.p99Ms),
        },
        launchRateRatioVsLocal: round(kube.launchesPerSecond / local.launchesPerSecond, 3),
        rolloutRateRatioVsLocal: round(kube.rolloutsPerSecond / local.rolloutsPerSecond, 3),
      });
    }
    return rows;
  } finally {
    await agent.close();
    await plane.close();
  }
}

const rows = values.executor === 'kubernetes' ? await kubernetesRows() : await localRows();
console.log(
  JSON.stringify(
    {
      executor: values.executor,
      cpus: os.cpus().length,
      node: process.version,
      loadAtStart: loadAtStart.map((l) => round(l, 2)),
      loadAtEnd: os.loadavg().map((l) => round(l, 2)),
      rows,
    },
    null,
    2,
  ),
);
await gateway.close();
await store.close();
rmSync(dir, { recursive: true, force: true });
