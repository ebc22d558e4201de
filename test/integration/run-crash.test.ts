import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeStage, type StageActivity } from '../../src/client/runs.js';
import { loadConfig } from '../../src/config/load.js';
import { gatewayOptions } from '../../src/gateway/from-config.js';
import { startGateway, type Gateway } from '../../src/gateway/server.js';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';
import { PolicyRegistry } from '../../src/registry/policy-registry.js';
import { rolloutIdFor } from '../../src/rollouts/rollout-id.js';
import { loadTaskSet } from '../../src/rollouts/tasks.js';
import { SqliteTraceStore } from '../../src/store/sqlite-store.js';
import type { TrainingIterationResult } from '../../workflows/index.js';
import { runRein, startRein, type RunningRein } from '../helpers/cli.js';
import { exampleDir, writeExampleConfig } from '../helpers/example-config.js';
import { testClient } from '../helpers/temporal.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-run-crash-'));
const env = { TEMPORAL_ADDRESS: undefined, REIN_CONFIG: undefined };
let configFile: string;
let store: SqliteTraceStore;
let gateway: Gateway;
let policyServer: PolicyServer;

// The gateway and the policy server stay up in this process; only `rein worker` processes die.
beforeAll(async () => {
  ({ file: configFile } = await writeExampleConfig(
    dir,
    { iterations: 1, tasksPerIteration: 8, samplesPerTask: 4, heldoutLimit: 4, heartbeatTimeoutSeconds: 3 },
    // Orchestration is under test, not learning: groups whose rewards happen to be equal still train.
    { samples: { zeroVarianceGroups: 'keep' } },
  ));
  const { config } = loadConfig({ file: configFile, env: {} });
  policyServer = await startPolicyServer({ host: '127.0.0.1', port: config.policyServer.port, models: { v0: config.run.base.checkpoint as string } });
  store = new SqliteTraceStore(config.gateway.traceDb);
  gateway = await startGateway(gatewayOptions(config.gateway, store, {}).options, { host: '127.0.0.1', port: config.gateway.port });
});
afterAll(async () => {
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

describe('a training run outlives its workers', () => {
  it('completes after its worker is SIGKILLed during rollouts and again during the update: no rollout lost, the batch trained once', { timeout: 400_000 }, async () => {
    const runId = 'crash-1';
    let worker = await startWorker();
    const started = await runRein(['--config', configFile, 'train', '--run-id', runId], { env });
    expect(started.code, started.stderr).toBe(0);
    expect(started.stdout).toContain(`Follow it with \`rein status ${runId}\``);

    const { client, connection } = await testClient();
    // Watches the iteration's pending activity (a describe, not a query: a query would wait for the dead worker's sticky queue).
    const until = async (check: (activity: StageActivity | undefined) => boolean) => {
      for (;;) {
        const activity = await describeStage(client, `${runId}-it1`);
        if (check(activity)) return;
        if ((await client.workflow.getHandle(runId).describe()).status.name !== 'RUNNING') throw new Error(`run ${runId} ended before the moment to kill its worker`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    try {
      // 1. Mid-way through the training rollouts.
      await until((a) => a?.type === 'runRollouts' && a.stage === 'rollouts' && (a.done ?? 0) >= 4);
      expect(await worker.stop('SIGKILL')).toBe(null);
      worker = await startWorker();
      // 2. While the trainer runs.
      await until((a) => a?.type === 'updatePolicy');
      expect(await worker.stop('SIGKILL')).toBe(null);
      worker = await startWorker();

      const handle = client.workflow.getHandle(runId);
      const final = (await handle.result()) as { state: string; policyVersion: string };
      expect(final).toMatchObject({ state: 'finished', policyVersion: `${runId}.v1` });
      const iteration = (await client.workflow.getHandle(`${runId}-it1`).result()) as TrainingIterationResult;

      // Every rollout of the iteration is in the journal, finished, once.
      const tasks = loadTaskSet(path.join(exampleDir, 'train.jsonl')).tasks.slice(0, 8);
      const ids = tasks.flatMap((t) => [0, 1, 2, 3].map((s) => rolloutIdFor(`${runId}.it1`, t.id, s)));
      const rollouts = await Promise.all(ids.map((id) => store.getRollout(id)));
      expect(rollouts.every((r) => r?.status === 'succeeded' || r?.status === 'failed')).toBe(true);
      expect(iteration.rollouts.total).toBe(32);
      expect(iteration.batch.rolloutsUsed).toBeGreaterThan(0);
      const lost = (await Promise.all(ids.map((id) => store.listEvents(id)))).flat().filter((e) => e.type === 'custom' && e.payload.name === 'attempt_failed');
      expect(lost.length).toBeGreaterThanOrEqual(1); // the attempts that died with the first worker, on record

      // The batch was trained once: the retried update found the first trainer's result; one version registered.
      expect(iteration.update).toMatchObject({ version: `${runId}.v1`, reused: true });
      const registry = new PolicyRegistry(path.join(dir, 'state', 'registry.sqlite'));
      try {
        expect(registry.list({ runId }).map((p) => [p.version, p.batchContentHash])).toEqual([[`${runId}.v1`, iteration.batch.contentHash]]);
      } finally {
        registry.close();
      }
    } finally {
      await connection.close();
      await worker.stop('SIGTERM');
    }
  });
});
