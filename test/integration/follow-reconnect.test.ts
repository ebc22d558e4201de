import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { connectTemporal, ensureSearchAttributes } from '../../src/client/temporal.js';
import { validateConfig } from '../../src/config/load.js';
import type { DevServer } from '../../src/devserver/dev-server.js';
import { createLogger } from '../../src/log/logger.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { pauseSignal, statusQuery, stopSignal, type TrainingRunInput } from '../../workflows/index.js';
import { startRein, type RunningRein } from '../helpers/cli.js';
import { startTestDevServer } from '../helpers/dev-server.js';
import { freePort } from '../helpers/ports.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-follow-reconnect-'));
const env = { TEMPORAL_ADDRESS: undefined, REIN_CONFIG: undefined };
const running: Array<{ stop(): Promise<unknown> }> = [];
afterAll(async () => {
  for (const r of running.reverse()) await r.stop().catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

/** This test's own dev server: one it may kill and start again on the same port and database. */
async function startServer(port: number): Promise<DevServer> {
  const server = await startTestDevServer(path.join(dir, 'dev.sqlite'), port);
  running.push(server);
  return server;
}

/** The real workflows; of the activities, only the one a run calls before it pauses. */
async function startWorker(address: string, taskQueue: string): Promise<{ stop(): Promise<void> }> {
  installTemporalRuntime(createLogger('warn'));
  const connection = await NativeConnection.connect({ address });
  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowBundle: { code: inject('workflowBundleCode') },
    activities: { registerBasePolicy: async () => {} },
  });
  const done = worker.run();
  const handle = {
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
      await connection.close();
    },
  };
  running.push(handle);
  return handle;
}

/** Waits for a state (polling), not for a guessed time. */
async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const said = (follower: RunningRein, text: string | RegExp) => () => {
  const { stdout, stderr } = follower.output();
  return typeof text === 'string' ? `${stdout}${stderr}`.includes(text) : text.test(`${stdout}${stderr}`);
};

describe('following a run while Temporal goes away and comes back', () => {
  it(
    'retries and reports the real result; gives up with its own exit code after the limit; stops at once on SIGTERM',
    { timeout: 400_000 },
    async () => {
      const port = await freePort();
      let server = await startServer(port);
      const address = server.address;
      const admin = await connectTemporal({ ...validateConfig({}, 'test').temporal, address });
      await ensureSearchAttributes(admin.connection, 'default');
      await admin.close();

      const taskQueue = 'follow-reconnect';
      let worker = await startWorker(address, taskQueue);
      let connection = await Connection.connect({ address });
      const runId = 'follow-1';
      const input: TrainingRunInput = {
        runId,
        configHash: 'test',
        base: { version: 'v0', checkpointUri: dir },
        startFrom: 'base',
        iterations: 1,
        train: {
          taskSet: { file: path.join(dir, 'tasks.jsonl'), sha256: 'none' },
          taskIds: ['t1'],
          tasksPerIteration: 1,
          samplesPerTask: 1,
        },
        onFailedIteration: 'stop',
      };
      // Paused from its first moment: the run waits (RUNNING) for as long as the test needs, and needs no rollouts.
      await new Client({ connection }).workflow.signalWithStart('trainingRun', {
        taskQueue,
        workflowId: runId,
        args: [input],
        signal: pauseSignal,
        signalArgs: [],
      });
      await until(
        'the run is paused',
        async () => (await new Client({ connection }).workflow.getHandle(runId).query(statusQuery)).stage === 'paused',
      );
      await connection.close();

      const configFile = path.join(dir, 'rein.json');
      writeFileSync(
        configFile,
        JSON.stringify({ dataDir: path.join(dir, 'state'), log: { level: 'warn' }, temporal: { address, taskQueue } }),
      );
      const follow = (...more: string[]) =>
        startRein(['--config', configFile, 'status', runId, '--follow', ...more], { env });
      const patient = follow();
      const impatient = follow('--reconnect-timeout', '1');
      const interrupted = follow();
      for (const follower of [patient, impatient, interrupted]) {
        running.push(follower);
        await follower.waitFor(/\d\d:\d\d:\d\d {2}paused/, 120_000);
      }

      // Temporal goes away while all three follow.
      await worker.stop();
      process.kill(server.pid, 'SIGKILL');
      await server.exited;

      // Past its limit, a follower stops with its own code and says the run may go on.
      expect(await impatient.exited).toBe(75);
      expect(impatient.output().stderr).toContain(`rein: Temporal at ${address} has not answered for`);
      expect(impatient.output().stderr).toContain(
        `This says nothing about run ${runId}: it may well still be going. Follow it again with \`rein status ${runId} --follow\``,
      );

      // SIGTERM while it retries: it stops following at once, and says how to follow again.
      await until(
        'the follower retries',
        said(interrupted, `Temporal at ${address} is unreachable; retrying (attempt 1)…`),
      );
      const signalled = Date.now();
      expect(await interrupted.stop('SIGTERM')).toBe(143);
      expect(Date.now() - signalled).toBeLessThan(10_000);
      expect(interrupted.output().stdout).toContain(
        `Stopped following; run ${runId} goes on: \`rein status ${runId} --follow\` follows it again`,
      );

      // The same server comes back on the same port and database; the patient follower carries on.
      await until('the patient follower retries', said(patient, 'is unreachable; retrying (attempt 1)…'));
      server = await startServer(port);
      worker = await startWorker(address, taskQueue);
      await until(
        'the patient follower reconnects',
        said(patient, `Temporal at ${address} answers again; following run ${runId}.`),
        240_000,
      );

      connection = await Connection.connect({ address });
      await new Client({ connection }).workflow.getHandle(runId).signal(stopSignal);
      await connection.close();
      expect(await patient.exited).toBe(0);
      expect(patient.output().stdout).toContain(`run ${runId}: stopped`);
      expect(patient.output().stderr).not.toContain('rein:');
    },
  );
});
