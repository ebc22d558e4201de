import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, describeStage, type RunReport, type StageActivity } from '../../src/client/runs.js';
import { listSchedules, type ScheduleListing } from '../../src/client/schedules.js';
import { loadConfig } from '../../src/config/load.js';
import { gatewayOptions } from '../../src/gateway/from-config.js';
import { startGateway, type Gateway } from '../../src/gateway/server.js';
import { policyServerKey } from '../../src/policy/admin-key.js';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';
import { withRegistry } from '../../src/registry/open.js';
import { rolloutIdFor } from '../../src/rollouts/rollout-id.js';
import { loadTaskSet } from '../../src/rollouts/tasks.js';
import { storeLocation } from '../../src/store/location.js';
import { traceStoreFromConfig } from '../../src/store/open.js';
import type { TraceStore } from '../../src/store/trace-store.js';
import { pauseSignal, resumeSignal, type TrainingIterationResult } from '../../workflows/index.js';
import { runRein, startRein, type RunningRein } from '../helpers/cli.js';
import { reinInProcessWith } from '../helpers/cli-in-process.js';
import { exampleDir, writeExampleConfig } from '../helpers/example-config.js';
import { testClient } from '../helpers/temporal.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-run-crash-'));
const env = { TEMPORAL_ADDRESS: undefined, REIN_CONFIG: undefined };
let configFile: string;
let store: TraceStore;
let gateway: Gateway;
let policyServer: PolicyServer;
// The worker the tests that do not kill theirs share (each start costs a CLI start and a workflow bundle).
let shared: Promise<RunningRein> | undefined;

// The gateway and the policy server stay up in this process; only `rein worker` processes die.
beforeAll(async () => {
  ({ file: configFile } = await writeExampleConfig(
    dir,
    // Held-out replays (and gates) only after a run's last iteration: runs paused or stopped midway skip them.
    {
      iterations: 1,
      tasksPerIteration: 4,
      samplesPerTask: 4,
      heldoutLimit: 4,
      heldoutEvery: 5,
      heartbeatTimeoutSeconds: 3,
    },
    // Orchestration is under test, not learning: groups whose rewards happen to be equal still train.
    // Eight harnesses at a time: 16 rollouts run in two waves, so some are always in flight when a worker dies.
    { samples: { zeroVarianceGroups: 'keep' }, rollouts: { concurrency: 8 } },
  ));
  const { config } = loadConfig({ file: configFile, env: {} });
  policyServer = await startPolicyServer({
    host: '127.0.0.1',
    port: config.policyServer.port,
    models: { v0: config.run.base.checkpoint as string },
    adminKey: policyServerKey(config.dataDir),
  });
  store = await traceStoreFromConfig(config);
  gateway = await startGateway(gatewayOptions(config.gateway, store, {}).options, {
    host: '127.0.0.1',
    port: config.gateway.port,
  });
});
afterAll(async () => {
  await (await shared)?.stop('SIGTERM');
  await gateway?.close();
  await store?.close();
  await policyServer?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function startWorker(): Promise<RunningRein> {
  const worker = startRein(['--config', configFile, 'worker'], { env });
  await worker.waitFor(/Worker polling task queue/, 120_000);
  return worker;
}
const sharedWorker = () => (shared ??= startWorker());

/**
 * `rein --config FILE ARGS` in this process, without the environment `env` removes: the CLI's own entry point, less a
 * child process's start-up (seconds each on a busy machine). Each test runs its first command as a real process; the
 * quick commands after it run here, one at a time (they share this process's stdout).
 */
const reinHere = (...args: string[]) => reinInProcessWith(env, '--config', configFile, ...args);

describe('training runs from the command line, against `rein worker` processes', () => {
  it(
    'completes after its worker is SIGKILLed during rollouts and again during the update: no rollout lost, the batch trained once',
    { timeout: 400_000 },
    async () => {
      const runId = 'crash-1';
      let worker = await startWorker();
      // The worker that finishes the run is the one the next tests share (no third start of its own).
      let ownWorker = true;
      const { client, connection } = await testClient();
      // Watches the iteration's pending activity (a describe, not a query: a query would wait for the dead worker's
      // sticky queue).
      const until = async (check: (activity: StageActivity | undefined) => boolean) => {
        for (;;) {
          const activity = await describeStage(client, `${runId}-it1`);
          if (check(activity)) return;
          if ((await client.workflow.getHandle(runId).describe()).status.name !== 'RUNNING')
            throw new Error(`run ${runId} ended before the moment to kill its worker`);
          await new Promise((r) => setTimeout(r, 100));
        }
      };
      try {
        const started = await runRein(['--config', configFile, 'train', '--run-id', runId], { env });
        expect(started.code, started.stderr).toBe(0);
        expect(started.stdout).toContain(`Follow it with \`rein status ${runId}\``);
        // 1. Mid-way through the training rollouts.
        await until((a) => a?.type === 'runRollouts' && a.stage === 'rollouts' && (a.done ?? 0) >= 4);
        expect(await worker.stop('SIGKILL')).toBe(null);
        worker = await startWorker();
        // 2. While the trainer runs (its log exists once it is spawned; killed before that, a retry rightly trains
        // anew).
        const trainerLog = path.join(dir, 'state', 'logs', `${runId}.v1.train.log`);
        await until((a) => a?.type === 'updatePolicy' && existsSync(trainerLog));
        expect(await worker.stop('SIGKILL')).toBe(null);
        worker = await sharedWorker();
        ownWorker = false;

        const handle = client.workflow.getHandle(runId);
        const final = (await handle.result()) as { state: string; policyVersion: string };
        expect(final).toMatchObject({ state: 'finished', policyVersion: `${runId}.v1` });
        const iteration = (await client.workflow.getHandle(`${runId}-it1`).result()) as TrainingIterationResult;

        // Every rollout of the iteration is in the journal, finished, once.
        const tasks = loadTaskSet(path.join(exampleDir, 'train.jsonl')).tasks.slice(0, 4);
        const ids = tasks.flatMap((t) => [0, 1, 2, 3].map((s) => rolloutIdFor(`${runId}.it1`, t.id, s)));
        const rollouts = await Promise.all(ids.map((id) => store.getRollout(id)));
        expect(rollouts.every((r) => r?.status === 'succeeded' || r?.status === 'failed')).toBe(true);
        expect(iteration.rollouts.total).toBe(16);
        expect(iteration.batch.rolloutsUsed).toBeGreaterThan(0);
        const lost = (await Promise.all(ids.map((id) => store.listEvents(id))))
          .flat()
          .filter((e) => e.type === 'custom' && e.payload.name === 'attempt_failed');
        expect(lost.length).toBeGreaterThanOrEqual(1); // the attempts that died with the first worker, on record

        // The batch was trained once: the retried update found the first trainer's result; one version registered.
        expect(iteration.update).toMatchObject({ version: `${runId}.v1`, reused: true });
        const registered = await withRegistry(
          storeLocation(loadConfig({ file: configFile, env: {} }).config),
          (registry) => registry.list({ runId }),
        );
        expect(registered.map((p) => [p.version, p.batchContentHash])).toEqual([
          [`${runId}.v1`, iteration.batch.contentHash],
        ]);
      } finally {
        await connection.close();
        if (ownWorker) await worker.stop('SIGTERM');
      }
    },
  );

  it(
    'pauses a run between iterations, resumes it, and stops it after the current iteration',
    { timeout: 300_000 },
    async () => {
      const rein = (...args: string[]) => runRein(['--config', configFile, ...args], { env });
      const here = reinHere;
      const runId = 'ops-1';
      // `rein train` starts services of its own when no worker polls: the worker first.
      await sharedWorker();
      expect(
        (
          await rein(
            'train',
            '--run-id',
            runId,
            '--iterations',
            '5',
            '--tasks',
            '2',
            '--samples',
            '2',
            '--heldout',
            '2',
          )
        ).code,
      ).toBe(0);
      expect((await here('pause', runId)).stdout).toBe(`pause sent to run ${runId}\n`);
      const { client, connection } = await testClient();
      const statusJson = () => describeRun(client, runId);
      let report = await statusJson();
      while (report.status?.stage !== 'paused') {
        expect(report.execution).toBe('RUNNING');
        await new Promise((r) => setTimeout(r, 500));
        report = await statusJson();
      }
      const pausedAfter = report.status.iterations.length;
      expect(pausedAfter).toBeLessThan(5);
      // At least two seconds pass while the CLI reads the status (and a stop names a run that does not exist).
      const [[status, unknown]] = await Promise.all([
        (async () => [await here('status', runId), await here('stop', 'no-such-run')] as const)(),
        new Promise((r) => setTimeout(r, 2000)),
      ]);
      expect(status.stdout).toContain(`run ${runId}: paused`);
      expect(unknown.stderr).toContain('no running run named no-such-run');
      expect((await statusJson()).status?.iterations).toHaveLength(pausedAfter); // nothing moves while paused

      expect((await here('resume', runId)).code).toBe(0);
      expect((await here('stop', runId)).code).toBe(0);
      // Iterations here are short, and a CLI process can take longer than one to start on a busy
      // machine: read what was done once the stop is delivered, rather than assume which iteration it met.
      const doneWhenStopped = (await statusJson()).status?.iterations.length as number;
      try {
        const final = (await client.workflow.getHandle(runId).result()) as RunReport['status'];
        expect(final?.state).toBe('stopped');
        expect(doneWhenStopped).toBeGreaterThanOrEqual(pausedAfter);
        // The iteration under way when stop arrived (if any) finishes, and no other starts.
        expect(final?.iterations.length).toBeGreaterThanOrEqual(doneWhenStopped);
        expect(final?.iterations.length).toBeLessThanOrEqual(doneWhenStopped + 1);
        expect(final?.iterations.length).toBeLessThan(5);
      } finally {
        await connection.close();
      }
    },
  );

  it(
    'schedules recurring runs: create, list, trigger (a second fire while one runs is skipped), pause, delete',
    { timeout: 300_000 },
    async () => {
      const rein = (...args: string[]) => runRein(['--config', configFile, 'schedule', ...args], { env });
      const here = (...args: string[]) => reinHere('schedule', ...args);
      const { client, connection } = await testClient();
      try {
        const [, created] = await Promise.all([
          sharedWorker(),
          rein(
            'create',
            'nightly',
            '--every',
            '1d',
            '--iterations',
            '2',
            '--tasks',
            '2',
            '--samples',
            '2',
            '--heldout',
            '2',
            '--note',
            'test',
          ),
        ]);
        expect(created.code, created.stderr).toBe(0);
        // The namespace is shared with other tests: look at this test's schedule only.
        const list = async () => (await listSchedules(client)).filter((s) => s.scheduleId === 'nightly');
        // `list` reads Temporal's visibility store, which is eventually consistent: under load a
        // schedule created a moment ago shows up a little later.
        let listed: ScheduleListing | undefined;
        while (!listed) {
          const listing = await here('list', '--json');
          listed = (JSON.parse(listing.stdout) as ScheduleListing[]).find((s) => s.scheduleId === 'nightly');
          if (!listed) await new Promise((r) => setTimeout(r, 250));
        }
        const again = await here('create', 'nightly', '--every', '1d');
        const bad = await here('create', 'bad', '--every', 'soon');
        expect(listed).toMatchObject({ scheduleId: 'nightly', paused: false, spec: 'every 1d', recentRuns: [] });
        expect(new Date(listed?.nextRuns[0] ?? 0).getTime() - Date.now()).toBeLessThanOrEqual(86_400_000);
        expect(again.stderr).toContain('a schedule named nightly already exists');
        expect(bad.stderr).toContain('--every "soon" is not a duration; expected e.g. 1d, 6h, 30m or 1h30m');

        expect((await here('trigger', 'nightly')).code).toBe(0);
        let recent: ScheduleListing['recentRuns'] = [];
        while (recent.length === 0) {
          await new Promise((r) => setTimeout(r, 500));
          recent = (await list())[0]?.recentRuns ?? [];
        }
        const runId = recent[0]?.runId as string;
        expect(runId).toMatch(/^nightly-\d{4}-\d\d-\d\dT/);
        // Held between its two iterations, the run is surely still going when the second fire comes.
        const run = client.workflow.getHandle(runId);
        await run.signal(pauseSignal);
        expect((await here('trigger', 'nightly')).code).toBe(0);
        await new Promise((r) => setTimeout(r, 2000));
        expect((await list())[0]?.recentRuns).toHaveLength(1); // the second trigger found the run going and was skipped
        await run.signal(resumeSignal);
        // Pausing the schedule leaves the run it started going: the CLI pauses it while the run finishes.
        const [final, paused] = await Promise.all([
          run.result() as Promise<RunReport['status']>,
          here('pause', 'nightly', '--note', 'holiday'),
        ]);
        expect(final).toMatchObject({ runId, state: 'finished', policyVersion: `${runId}.v2` });
        expect((await list())[0]?.recentRuns).toHaveLength(1);

        expect(paused.stdout).toBe('schedule nightly paused\n');
        await expect
          .poll(list, { timeout: 10_000 })
          .toEqual([expect.objectContaining({ paused: true, note: 'holiday' })]); // visibility catches up within moments
        expect((await here('list')).stdout).toMatch(/nightly +paused \(holiday\) +every 1d/);
        expect((await here('delete', 'nightly')).code).toBe(0);
        await expect.poll(list, { timeout: 10_000 }).toEqual([]);
        const missing = await here('delete', 'nightly');
        expect(missing.code).toBe(2);
        expect(missing.stderr).toContain('no schedule named nightly; `rein schedule list` lists them');
      } finally {
        await connection.close();
      }
    },
  );

  it(
    'schedule async: iteration 2 samples beside iteration 1 update, within the staleness bound, served by the version the journal names',
    { timeout: 300_000 },
    async () => {
      const runId = 'async-1';
      // The same services, a run config of its own: run.schedule async, one version behind allowed and corrected.
      const asyncConfig = JSON.parse(readFileSync(configFile, 'utf8')) as Record<string, Record<string, unknown>>;
      asyncConfig.run = { ...asyncConfig.run, schedule: 'async' };
      asyncConfig.samples = { ...asyncConfig.samples, maxVersionsBehind: 1, importanceWeightCap: 2 };
      const asyncFile = path.join(dir, 'async.json');
      writeFileSync(asyncFile, JSON.stringify(asyncConfig));
      await sharedWorker();
      const sizes = ['--iterations', '2', '--tasks', '2', '--samples', '4'];
      const started = await reinInProcessWith(env, '--config', asyncFile, 'train', '--run-id', runId, ...sizes);
      expect(started.code, started.stderr).toBe(0);
      const { client, connection } = await testClient();
      try {
        const final = (await client.workflow.getHandle(runId).result()) as NonNullable<RunReport['status']>;
        expect(final).toMatchObject({ state: 'finished', policyVersion: `${runId}.v2` });

        // Iteration 2's rollouts ran (from v0) while iteration 1 built its batch and trained v1.
        const ran = async (id: string) =>
          (await client.workflow.getHandle(id).describe()) as { startTime: Date; closeTime?: Date };
        const [it1, ahead] = await Promise.all([ran(`${runId}-it1`), ran(`${runId}-it2-rollouts`)]);
        expect(ahead.startTime.getTime()).toBeLessThan(it1.closeTime?.getTime() ?? 0);
        const results = await Promise.all(
          [1, 2].map(
            async (n) => (await client.workflow.getHandle(`${runId}-it${n}`).result()) as TrainingIterationResult,
          ),
        );
        expect(results.map((r) => [r.parent, r.sampledFrom])).toEqual([
          ['v0', 'v0'],
          [`${runId}.v1`, 'v0'],
        ]);
        // Every rollout trained on was within samples.maxVersionsBehind of the policy it trained; the correction acted.
        expect(results[0]?.batch.keptByVersionsBehind).toEqual({ '0': results[0]?.batch.rolloutsUsed });
        expect(results[1]?.batch.keptByVersionsBehind).toEqual({ '1': results[1]?.batch.rolloutsUsed });
        expect(final.iterations[1]?.samples).toMatchObject({
          sampledFrom: 'v0',
          importance: { ratioMean: expect.any(Number), maskedFraction: 0 },
        });
        expect(results[1]?.update.importanceWeights).toMatchObject({ mode: 'truncate', cap: 2 });

        // Weight sync is ordered: every call of every training rollout went to the version its rollout was pinned
        // to, and the journal names it (v1 was loaded while iteration 2's calls ran on v0).
        const tasks = loadTaskSet(path.join(exampleDir, 'train.jsonl')).tasks.slice(0, 4);
        for (const [n, taskIds] of [
          [1, tasks.slice(0, 2)],
          [2, tasks.slice(2, 4)],
        ] as const) {
          const ids = taskIds.flatMap((t) => [0, 1, 2, 3].map((k) => rolloutIdFor(`${runId}.it${n}`, t.id, k)));
          for (const id of ids) {
            const rollout = await store.getRollout(id);
            expect(rollout?.policyVersion).toBe('v0');
            const calls = await store.listCalls(id, rollout?.attempts);
            expect(calls.length).toBeGreaterThan(0);
            expect(new Set(calls.map((c) => c.policyVersion))).toEqual(new Set(['v0']));
          }
        }
      } finally {
        await connection.close();
      }
    },
  );
});
