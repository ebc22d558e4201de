import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { rolloutIdFor } from '../../src/rollouts/runner.js';
import { taskSetHash } from '../../src/rollouts/tasks.js';
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

beforeAll(async () => {
  t = await startTestGateway();
  writeFileSync(taskFile, `${tasks.map((task) => JSON.stringify(task)).join('\n')}\n`);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A config for `rein worker` on the shared dev server: the example agent through the test gateway. */
function workerConfig(taskQueue: string, harnessCommand = process.execPath): string {
  const file = path.join(dir, `${taskQueue}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      dataDir: path.join(dir, 'data'),
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
      rollouts: { concurrency: 2 },
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
