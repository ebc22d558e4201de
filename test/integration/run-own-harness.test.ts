import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRun, trainingRunInput } from '../../src/client/runs.js';
import { configHash } from '../../src/config/config-hash.js';
import { loadConfig } from '../../src/config/load.js';
import type { ReinConfig } from '../../src/config/schema.js';
import { heldoutBatchId } from '../../src/gate/release-ids.js';
import { harnessVersion } from '../../src/rollouts/harness-spec.js';
import { rolloutIdFor } from '../../src/rollouts/rollout-id.js';
import type { RunStatus } from '../../workflows/index.js';
import { startRein, type RunningRein } from '../helpers/cli.js';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { testClient } from '../helpers/temporal.js';

/*
 * Issue 29 item 5: a worker started from one config runs every run with that run's own config.
 * One real `rein worker`, started from A's config, takes two runs at once (A's and B's, whose
 * harnesses differ); each rollout must have run its own run's harness, and the two held-out
 * replays must be distinct batches. The runs only replay their base (0 iterations): no training.
 */

const root = path.resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-own-harness-'));
const harnessLog = path.join(dir, 'harness.log');
const taskFile = path.join(dir, 'tasks.jsonl');
const tasks = [
  { id: 'a', question: '2*7', answer: 14 },
  { id: 'b', question: '3*7', answer: 21 },
];
let t: TestGateway;
let worker: RunningRein | undefined;

beforeAll(async () => {
  t = await startTestGateway();
  writeFileSync(taskFile, `${tasks.map((task) => JSON.stringify(task)).join('\n')}\n`);
  mkdirSync(path.join(dir, 'base'));
  writeFileSync(path.join(dir, 'verifier.mjs'), 'process.stdout.write(\'{"components":{"success":1}}\\n\');\n');
});
afterAll(async () => {
  await worker?.stop('SIGKILL');
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A config file whose harness is named.mjs with the given name; everything else shared (one dataDir, one store). */
function configFile(name: string, taskQueue: string): { file: string; config: ReinConfig } {
  const file = path.join(dir, `${name}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      dataDir: path.join(dir, 'data'),
      log: { level: 'info' },
      temporal: { address: inject('temporalAddress'), taskQueue },
      gateway: { publicUrl: t.gateway.url },
      harness: {
        version: name,
        local: {
          command: process.execPath,
          args: [path.join(root, 'test/fixtures/harnesses/named.mjs'), name, '{task}', '{output}'],
          env: { HARNESS_LOG: harnessLog },
        },
      },
      verifier: { command: process.execPath, args: [path.join(dir, 'verifier.mjs'), '{task}', '{output}'] },
      rollouts: { concurrency: 2 },
      run: {
        base: { version: 'policy-v1', checkpoint: path.join(dir, 'base') },
        trainTasks: taskFile,
        heldoutTasks: taskFile,
        tasksPerIteration: 2,
        samplesPerTask: 1,
      },
      gate: { samplesPerTask: 1 },
    }),
  );
  return { file, config: loadConfig({ file, env: {} }).config };
}

/** Which harness ran each rollout, from the harnesses' own log. */
function harnessOfRollout(): Map<string, string> {
  const lines = existsSync(harnessLog) ? readFileSync(harnessLog, 'utf8').trim().split('\n') : [];
  return new Map(lines.filter(Boolean).map((line) => line.split(' ') as [string, string]));
}

describe('two runs with different harnesses on one worker', () => {
  it(
    'runs each rollout with its own run’s harness, and keeps their held-out replays apart',
    { timeout: 240_000 },
    async () => {
      const taskQueue = `own-harness-${randomUUID()}`;
      const a = configFile('A', taskQueue);
      const b = configFile('B', taskQueue);
      expect(configHash(a.config)).not.toBe(configHash(b.config));
      worker = startRein(['worker', '--config', a.file], {
        env: { REIN_GATEWAY_ADMIN_KEY: ADMIN_KEY, TEMPORAL_ADDRESS: undefined },
      });
      await worker.waitFor(/Worker polling task queue/, 120_000);

      const { client, connection } = await testClient();
      try {
        const start = (runId: string, config: ReinConfig) =>
          startRun(client, taskQueue, { ...trainingRunInput(config), runId, iterations: 0 }, config);
        const [runA, runB] = [`own-a-${randomUUID()}`, `own-b-${randomUUID()}`];
        // Both at once, on the one worker (started from A's config).
        await Promise.all([start(runA, a.config), start(runB, b.config)]);
        const result = (id: string) => client.workflow.getHandle(id).result() as Promise<RunStatus>;
        const [statusA, statusB] = await Promise.all([result(runA), result(runB)]);
        expect(statusA.heldout?.base).toMatchObject({ policyVersion: 'policy-v1' });
        expect(statusB.heldout?.base).toMatchObject({ policyVersion: 'policy-v1' });

        const ran = harnessOfRollout();
        const batches = new Map<string, string>();
        for (const [name, { config }] of [
          ['A', a],
          ['B', b],
        ] as const) {
          const version = harnessVersion(config.harness!);
          const batchId = heldoutBatchId('policy-v1', configHash(config), version);
          batches.set(name, batchId);
          for (const task of tasks) {
            const id = rolloutIdFor(batchId, task.id, 0);
            expect(ran.get(id), `${id} ran ${name}'s harness`).toBe(name);
            expect(await t.store.getRollout(id), id).toMatchObject({
              status: 'succeeded',
              policyVersion: 'policy-v1',
              metadata: { harnessVersion: version },
            });
          }
        }
        expect(batches.get('A')).not.toBe(batches.get('B'));
        // Nothing else ran: four rollouts, two per harness.
        expect([...ran.values()].sort()).toEqual(['A', 'A', 'B', 'B']);
      } finally {
        await connection.close();
      }
    },
  );
});
