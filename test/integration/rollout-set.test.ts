import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { rolloutIdFor } from '../../src/rollouts/runner.js';
import { taskSetHash } from '../../src/rollouts/tasks.js';
import { NativeConnection } from '@temporalio/worker';
import { describeStage } from '../../src/client/run-status.js';
import { loadConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/log/logger.js';
import { activityDepsFromConfig } from '../../workers/activity-deps.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { createReinWorker } from '../../workers/worker.js';
import { startRein, type RunningRein } from '../helpers/cli.js';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { testClient } from '../helpers/temporal.js';

const root = path.resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-rollout-set-'));
const launchLog = path.join(dir, 'launches.log');
const tasks = Array.from({ length: 6 }, (_, i) => ({ id: `t${i}`, question: `${i + 2}*7`, answer: (i + 2) * 7 }));
const taskFile = path.join(dir, 'tasks.jsonl');
let t: TestGateway;
const workers: RunningRein[] = [];
const bundledWorkers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  t = await startTestGateway();
  writeFileSync(taskFile, `${tasks.map((task) => JSON.stringify(task)).join('\n')}\n`);
  mkdirSync(path.join(dir, 'gateway'));
  writeFileSync(path.join(dir, 'gateway', 'admin-key'), ADMIN_KEY);
});
afterAll(async () => {
  await Promise.all([...workers.map((w) => w.stop('SIGKILL')), ...bundledWorkers.map((stop) => stop())]);
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A config for `rein worker` on the shared dev server: the example agent through the test gateway. */
function workerConfig(
  taskQueue: string,
  harnessCommand = process.execPath,
  options: { name?: string; concurrency?: number } = {},
): string {
  const name = options.name ?? taskQueue;
  const file = path.join(dir, `${name}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      dataDir: path.join(dir, `data-${name}`),
      log: { level: 'info' },
      temporal: { address: inject('temporalAddress'), taskQueue },
      gateway: { publicUrl: t.gateway.url },
      harness: {
        version: 'test',
        local: {
          command: harnessCommand,
          args: [path.join(root, 'test/fixtures/harnesses/counting.mjs'), '{task}', '{output}'],
          env: { LAUNCH_LOG: launchLog, LAUNCH_DELAY_MS: '300' },
          timeoutSeconds: 60,
        },
      },
      verifier: {
        command: process.execPath,
        args: [path.join(root, 'examples/calculator-agent/verifier.mjs'), '{task}', '{output}'],
      },
      rollouts: { concurrency: options.concurrency ?? 2 },
      // Its admin-key file (the gateway's ADMIN_KEY), for workers in this process.
      ...(options.name && { gateway: { publicUrl: t.gateway.url, secretFile: path.join(dir, 'gateway', 'secret') } }),
    }),
  );
  return file;
}

const startWorker = async (config: string) => {
  const worker = startRein(['worker', '--config', config], {
    env: { REIN_GATEWAY_ADMIN_KEY: ADMIN_KEY, TEMPORAL_ADDRESS: undefined },
  });
  workers.push(worker);
  await worker.waitFor(/Worker polling task queue/, 120_000);
  return worker;
};

const launches = () =>
  existsSync(launchLog) ? readFileSync(launchLog, 'utf8').trim().split('\n').filter(Boolean) : [];

describe('the rolloutSet workflow and its runRollouts activity', () => {
  it(
    'finishes the set after its worker is killed mid-way: no rollout lost, none launched beyond its recorded attempts',
    { timeout: 300_000 },
    async () => {
      const taskQueue = `rollouts-${randomUUID()}`;
      const config = workerConfig(taskQueue);
      const first = await startWorker(config);
      const { client, connection } = await testClient();
      try {
        const handle = await client.workflow.start('rolloutSet', {
          taskQueue,
          workflowId: `rollout-set-${randomUUID()}`,
          args: [
            {
              batchId: 'killed',
              taskSet: { file: taskFile, sha256: taskSetHash(tasks) },
              taskIds: tasks.map((task) => task.id),
              samplesPerTask: 2,
              mode: 'train',
              policyVersion: 'policy-v1',
              heartbeatTimeoutSeconds: 3,
            },
          ],
        });
        // Kill the worker once the set is under way.
        while (launches().length < 6) await new Promise((r) => setTimeout(r, 100));
        await first.stop('SIGKILL');
        await startWorker(config);

        const summary = await handle.result();
        expect(summary).toMatchObject({
          batchId: 'killed',
          total: 12,
          byStatus: { succeeded: 12 },
          byFailureClass: {},
          meanReward: 1,
        });
        expect(summary.harnessVersion).toMatch(/^h-[0-9a-f]{16}$/);

        const launched = new Map<string, number>();
        for (const line of launches()) {
          const [id] = line.split(' ');
          launched.set(id as string, (launched.get(id as string) ?? 0) + 1);
        }
        for (const task of tasks) {
          for (const sample of [0, 1]) {
            const id = rolloutIdFor('killed', task.id, sample);
            const rollout = await t.store.getRollout(id);
            expect(rollout, id).toMatchObject({
              status: 'succeeded',
              policyVersion: 'policy-v1',
              metadata: { harnessVersion: summary.harnessVersion },
            });
            expect(launched.get(id) ?? 0, id).toBeGreaterThanOrEqual(1);
            expect(launched.get(id), id).toBeLessThanOrEqual(rollout?.attempts ?? 0);
            const events = await t.store.listEvents(id);
            expect(events.filter((e) => e.type === 'reward' && e.source === 'admin')).toHaveLength(1);
            // An attempt lost with its worker is on record as the orchestrator's failure.
            const lost = events
              .filter((e) => e.type === 'custom' && e.payload.name === 'attempt_failed')
              .map((e) => e.payload.data);
            expect(lost).toEqual(
              rollout?.attempts === 2 ? [expect.objectContaining({ attempt: 1, failureClass: 'orchestrator' })] : [],
            );
          }
        }
        // The rollouts that were running when the worker died (at most two) took a second attempt; no other did.
        const attempts = await Promise.all(
          tasks.flatMap((task) =>
            [0, 1].map(async (s) => (await t.store.getRollout(rolloutIdFor('killed', task.id, s)))?.attempts),
          ),
        );
        const retried = attempts.filter((a) => a === 2).length;
        expect(retried).toBeGreaterThanOrEqual(1);
        expect(retried).toBeLessThanOrEqual(2);
        expect(attempts.every((a) => a === 1 || a === 2)).toBe(true);
        expect(launches().length).toBeLessThanOrEqual(12 + retried);
      } finally {
        await connection.close();
      }
    },
  );

  it(
    'fails at once, without retrying or launching anything, when the harness cannot start',
    { timeout: 180_000 },
    async () => {
      const taskQueue = `rollouts-${randomUUID()}`;
      await startWorker(workerConfig(taskQueue, '/no/such/node'));
      const before = launches().length;
      const { client, connection } = await testClient();
      try {
        const run = client.workflow.execute('rolloutSet', {
          taskQueue,
          workflowId: `rollout-set-${randomUUID()}`,
          args: [
            {
              batchId: 'unlaunchable',
              taskSet: { file: taskFile, sha256: taskSetHash(tasks) },
              taskIds: ['t0'],
              samplesPerTask: 1,
              mode: 'train',
              policyVersion: 'policy-v1',
            },
          ],
        });
        const failure = await run.catch((err: unknown) => err);
        expect(failure).toBeInstanceOf(WorkflowFailedError);
        const cause = (failure as WorkflowFailedError).cause?.cause as { type?: string; message?: string } | undefined;
        expect(cause).toMatchObject({
          type: 'RolloutSetupError',
          message: expect.stringContaining('harness.command: /no/such/node is not an executable file'),
        });
        expect(launches().length).toBe(before);
        expect(await t.store.getRollout(rolloutIdFor('unlaunchable', 't0', 0))).toBeUndefined();
      } finally {
        await connection.close();
      }
    },
  );
});

/** A worker process on the test setup's workflow bundle (no bundling at start), killed with SIGKILL at the end. */
function startBundledWorker(config: string, bundle: string) {
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  const child = spawn(
    process.execPath,
    ['--import', tsx, path.join(root, 'test/helpers/bundled-worker.ts'), config, bundle],
    {
      env: { ...process.env, REIN_GATEWAY_ADMIN_KEY: ADMIN_KEY, TEMPORAL_ADDRESS: undefined },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let stdout = '';
  const polling = new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (stdout.includes('worker polling')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`worker exited (${code}) before polling: ${stdout}`)));
  });
  const exited = new Promise((resolve) => child.once('close', resolve));
  const stop = async () => {
    child.kill('SIGKILL');
    await exited;
  };
  bundledWorkers.push(stop);
  return { pid: child.pid as number, polling, stop };
}

/** A Rein worker inside this process on the task queue, with the same config as `rein worker --config` would read. */
async function inProcessWorker(config: string) {
  installTemporalRuntime(createLogger('warn'));
  const loaded = loadConfig({ file: config, env: {} });
  const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
  const activities = await activityDepsFromConfig(loaded.config);
  const worker = await createReinWorker({
    connection,
    namespace: 'default',
    taskQueue: loaded.config.temporal.taskQueue,
    ...activities.deps,
    workflowBundle: { code: inject('workflowBundleCode') },
  });
  const done = worker.run();
  return async () => {
    worker.shutdown();
    await done;
    await connection.close();
    await activities.close();
  };
}

/** The tasks of a set run in shards: 6 tasks x 2 samples, in 6 shards of one task, 3 at once. */
const shardTasks = Array.from({ length: 6 }, (_, i) => ({ id: `s${i}`, question: `${i + 3}*3`, answer: (i + 3) * 3 }));
const SHARDED = { samplesPerTask: 2, shards: { size: 2, inFlight: 3 } };

describe('a rollout set shared by several workers', () => {
  it('scores every rollout exactly once when one of 3 workers is killed mid-set', { timeout: 180_000 }, async () => {
    const taskQueue = `shards-${randomUUID()}`;
    const config = (n: number) =>
      workerConfig(taskQueue, process.execPath, { name: `${taskQueue}-${n}`, concurrency: 6 });
    const bundle = path.join(dir, 'workflows.cjs');
    writeFileSync(bundle, inject('workflowBundleCode'));
    // The worker to kill runs alone at first, so that it surely holds shards when it dies.
    const victim = startBundledWorker(config(1), bundle);
    await victim.polling;
    const shardFile = path.join(dir, 'shard-tasks.jsonl');
    writeFileSync(shardFile, `${shardTasks.map((task) => JSON.stringify(task)).join('\n')}\n`);
    const batchId = `sharded-${randomUUID().slice(0, 8)}`;
    const { client, connection } = await testClient();
    const stops: Array<() => Promise<void>> = [];
    try {
      const handle = await client.workflow.start('rolloutSet', {
        taskQueue,
        workflowId: `rollout-set-${batchId}`,
        args: [
          {
            batchId,
            taskSet: { file: shardFile, sha256: taskSetHash(shardTasks) },
            taskIds: shardTasks.map((task) => task.id),
            mode: 'train',
            policyVersion: 'policy-v1',
            heartbeatTimeoutSeconds: 2,
            rescore: true,
            ...SHARDED,
          },
        ],
      });
      const mine = () => launches().filter((line) => line.startsWith(`${batchId}.`));
      while (mine().length < 3) await new Promise((r) => setTimeout(r, 50));
      // `rein status` counts the whole set, over its shards.
      const stage = await describeStage(client, handle.workflowId);
      expect(stage).toMatchObject({ type: 'runRollouts', total: 12 });
      expect(stage?.done).toBeLessThan(12);
      // Killed before the others start: starting a worker can take longer than the victim's shards
      // on a loaded machine, and a victim that finished them before it died would prove nothing.
      await victim.stop();
      stops.push(await inProcessWorker(config(2)), await inProcessWorker(config(3)));

      const summary = await handle.result();
      expect(summary).toMatchObject({ batchId, total: 12, byStatus: { succeeded: 12 }, unscored: 0, meanReward: 1 });
      expect(Object.keys(summary.meanRewardByTask).sort()).toEqual(shardTasks.map((task) => task.id).sort());
      const launched = new Map<string, number>();
      for (const [id] of mine().map((line) => line.split(' ')))
        launched.set(id as string, (launched.get(id as string) ?? 0) + 1);
      for (const task of shardTasks) {
        for (const sample of [0, 1]) {
          const id = rolloutIdFor(batchId, task.id, sample);
          const rollout = await t.store.getRollout(id);
          expect(rollout?.status, id).toBe('succeeded');
          const rewards = (await t.store.listEvents(id)).filter((e) => e.type === 'reward' && e.source === 'admin');
          expect(rewards, `${id}: scored exactly once`).toHaveLength(1);
          expect(launched.get(id), id).toBeLessThanOrEqual(rollout?.attempts ?? 0);
        }
      }
      // The killed worker's shards were retried on the other two, which shared the rest of the set. (A killed
      // worker's last attempt leaves no started event; the two in this process share one identity.)
      const history = await handle.fetchHistory();
      const starts = (history.events ?? []).flatMap((e) => e.activityTaskStartedEventAttributes ?? []);
      expect(starts).toHaveLength(6);
      expect(starts.some((s) => (s.attempt ?? 1) > 1)).toBe(true);
      expect(starts.every((s) => !s.identity?.startsWith(`${victim.pid}@`) || (s.attempt ?? 1) === 1)).toBe(true);
      const bytes = proto.temporal.api.history.v1.History.encode(history).finish().length;
      console.log(`sharded set of 12 rollouts in 6 shards: ${history.events?.length} history events, ${bytes} bytes`);
    } finally {
      await Promise.all(stops.map((stop) => stop()));
      await connection.close();
    }
  });
});
