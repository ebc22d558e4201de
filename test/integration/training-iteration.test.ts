import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ArtifactStore } from '../../src/artifacts/artifact-store.js';
import { LocalArtifactStore } from '../../src/artifacts/local-store.js';
import { S3ArtifactStore } from '../../src/artifacts/s3-store.js';
import { reinConfigSchema } from '../../src/config/schema.js';
import { createLogger } from '../../src/log/logger.js';
import { packageRoot } from '../../src/package-root.js';
import type { LedgerStore } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open.js';
import { openRegistry } from '../../src/registry/open.js';
import type { PolicyRegistry } from '../../src/registry/policy-registry.js';
import { loadTaskSet } from '../../src/rollouts/tasks.js';
import { startEmbeddedStack, type EmbeddedStack } from '../../src/training/embedded-stack.js';
import { localPolicyTrainer } from '../../src/training/policy-update.js';
import { stagedPolicyTrainer } from '../../src/training/staged-trainer.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { fixedRunDeps } from '../../activities/run-deps.js';
import { createReinWorker } from '../../workers/worker.js';
import {
  pauseSignal,
  resumeSignal,
  statusQuery,
  stopSignal,
  type RunStatus,
  type TrainingIterationInput,
  type TrainingRunInput,
} from '../../workflows/index.js';
import { recordHistory, recordingHistories } from '../helpers/histories.js';
import { setupPython } from '../helpers/python.js';
import { startTestS3, type TestS3 } from '../helpers/s3.js';
import { testClient } from '../helpers/temporal.js';
import { suiteStoreBackend, testStoreLocation } from '../helpers/postgres.js';

const example = path.join(packageRoot(), 'examples', 'calculator-agent');
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-iteration-'));
const config = reinConfigSchema.parse({});
// Orchestration is under test here, not learning (that is learning-loop.test.ts): a few rollouts
// whose rewards happen to be all equal within each task still make a batch and a version.
const samples = { ...config.samples, zeroVarianceGroups: 'keep' as const };
let stack: EmbeddedStack;
let s3: TestS3;
let s3Artifacts: S3ArtifactStore;
let registry: PolicyRegistry;
let ledger: LedgerStore;

/**
 * Replays a history with the current workflow code; when recording (`npm run record:histories`), keeps it for
 * replay.test.ts.
 */
async function replayAndRecord(
  history: Awaited<ReturnType<WorkflowHandle['fetchHistory']>>,
  name: string,
): Promise<void> {
  await Worker.runReplayHistory({ workflowBundle: { code: inject('workflowBundleCode') } }, history);
  if (recordingHistories) recordHistory(history, name);
}

beforeAll(async () => {
  // The first iteration below keeps its artifacts in S3 (moto standing in): the policy server stages the checkpoints it
  // loads from there.
  s3 = await startTestS3();
  s3Artifacts = new S3ArtifactStore(`s3://${await s3.bucket()}/rein`, { endpoint: s3.endpoint });
  stack = await startEmbeddedStack({
    workDir: dir,
    baseCheckpoint: path.join(packageRoot(), 'models', 'base'),
    artifacts: { store: s3Artifacts, stagingDir: path.join(dir, 'policy-server-staging') },
  });
  const stores = await testStoreLocation(suiteStoreBackend, dir);
  registry = await openRegistry(stores);
  ledger = await openLedger(stores);
  await registry.register({
    version: 'v0',
    parent: null,
    runId: null,
    iteration: null,
    checkpointUri: path.join(packageRoot(), 'models', 'base'),
    batchContentHash: null,
    trainerMetrics: {},
  });
});
afterAll(async () => {
  await registry.close();
  await ledger.close();
  await stack.close();
  await s3.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * A Rein worker on a fresh task queue of the shared dev server, with the embedded stack as its
 * gateway and serving backend; its trainer staged as the worker's is (s3:// in, s3:// out).
 */
async function startWorker(
  prefix: string,
  trainer = localPolicyTrainer(config.trainer, path.join(dir, 'logs')),
  artifacts: ArtifactStore = new LocalArtifactStore(path.join(dir, 'artifacts')),
) {
  installTemporalRuntime(createLogger('warn'));
  const taskQueue = `${prefix}-${randomUUID()}`;
  const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
  const { client, connection: clientConnection } = await testClient();
  const program = (script: string) => ({
    command: process.execPath,
    args: [path.join(example, script), '{task}', '{output}'],
    env: {},
    envAllow: ['PATH', 'HOME'],
    timeoutSeconds: 60,
    taskOnStdin: false,
  });
  const worker = await createReinWorker({
    connection,
    namespace: 'default',
    taskQueue,
    workflowBundle: { code: inject('workflowBundleCode') },
    dataDir: dir,
    store: stack.store,
    artifacts,
    // One setup for every run on this worker, whatever its configHash (this test's hashes are made up).
    runs: fixedRunDeps({
      samples,
      rollouts: { ...config.rollouts, concurrency: 8 },
      harness: { version: 'example', local: program('harness.mjs') },
      verifier: program('verifier.mjs'),
      gate: config.gate,
    }),
    gateway: stack.control,
    registry,
    ledger,
    trainer: stagedPolicyTrainer(trainer, {
      artifacts,
      stagingDir: path.join(dir, 'staging'),
      policiesDir: path.join(dir, 'policies'),
    }),
    serving: stack.serving,
    policiesDir: path.join(dir, 'policies'),
  });
  const close = async () => {
    await clientConnection.close();
    await connection.close();
  };
  return { worker, client, taskQueue, close };
}

/**
 * Iteration 1 from v0 on train tasks [from, to) × 4 samples, with the first `heldoutTasks` held-out tasks replayed
 * greedily.
 */
function iterationInput(runId: string, [from, to]: [number, number], heldoutTasks: number): TrainingIterationInput {
  const train = loadTaskSet(path.join(example, 'train.jsonl'));
  const heldout = loadTaskSet(path.join(example, 'heldout.jsonl'));
  return {
    runId,
    iteration: 1,
    policyVersion: 'v0',
    configHash: 'c0nf1g',
    train: {
      taskSet: { file: train.file, sha256: train.sha256 },
      taskIds: train.tasks.slice(from, to).map((t) => t.id),
      samplesPerTask: 4,
    },
    heldout: {
      taskSet: { file: heldout.file, sha256: heldout.sha256 },
      taskIds: heldout.tasks.slice(0, heldoutTasks).map((t) => t.id),
      harnessEnv: { AGENT_TEMPERATURE: '0' },
    },
  };
}

describe('the trainingIteration and trainingRun workflows (real dev server, embedded policy)', () => {
  it(
    'runs rollouts, builds a batch into S3, trains and serves a candidate from S3 with its lineage, replays held-out tasks; a rerun trains nothing twice',
    { timeout: 240_000 },
    async () => {
      const { worker, client, taskQueue, close } = await startWorker('iteration', undefined, s3Artifacts);
      const input = iterationInput('run-a', [0, 3], 4);
      try {
        await worker.runUntil(async () => {
          const handle = await client.workflow.start('trainingIteration', {
            taskQueue,
            workflowId: `run-a-it1-${randomUUID()}`,
            args: [input],
          });
          const result = await handle.result();
          expect(result).toMatchObject({
            iteration: 1,
            parent: 'v0',
            candidate: 'run-a.v1',
            rollouts: { total: 12 },
            heldout: { total: 4 },
            update: { version: 'run-a.v1', reused: false },
          });
          // Registered with its lineage and served behind the gateway; the gate compared it with production (the base).
          expect(await registry.get('run-a.v1')).toMatchObject({
            parent: 'v0',
            runId: 'run-a',
            iteration: 1,
            batchContentHash: result.batch.contentHash,
          });
          expect(stack.policyServer.models()).toContain('run-a.v1');
          // Batch and checkpoint live in S3: the trainer read and wrote local copies the worker staged, the policy
          // server loaded its own.
          expect(result.batch.uri).toMatch(
            new RegExp(`^${s3Artifacts.url}/runs/run-a/iterations/1/batch-[0-9a-f]{16}\\.safetensors$`),
          );
          expect((await registry.get('run-a.v1'))?.checkpointUri).toBe(`${s3Artifacts.url}/policies/run-a/run-a.v1`);
          expect(result.release).toMatchObject({ incumbent: 'v0', gate: { decisionId: 'run-a.v1.vs.v0.c0nf1g.4x1' } });
          const decision = await registry.decision('run-a.v1.vs.v0.c0nf1g.4x1');
          expect(decision?.record).toMatchObject({
            checks: expect.any(Array),
            rules: { acceptReward: 1 },
            candidate: { version: 'run-a.v1' },
            incumbent: { version: 'v0' },
          });
          // Production moved only if the gate passed.
          expect(await registry.alias('production')).toBe(result.release?.gate.verdict === 'pass' ? 'run-a.v1' : 'v0');
          expect(result.release?.promoted).toBe(result.release?.gate.verdict === 'pass');
          const replayed = await stack.store.listRollouts({ mode: 'eval' });
          expect(replayed.items.length).toBe(8);
          for (const [version, prefix] of [
            ['run-a.v1', 'heldout.run-a.v1.'],
            ['v0', 'heldout.v0.'],
          ]) {
            const one = replayed.items.find((r) => r.id.startsWith(prefix as string));
            expect((await stack.store.listCalls(one?.id as string)).every((c) => c.policyVersion === version)).toBe(
              true,
            );
          }
          // The iteration's ledger row: which policy, harness and environment, and what it measured.
          expect(await ledger.get('run-a.it1')).toMatchObject({
            kind: 'iteration',
            model: { policyVersion: 'run-a.v1', parent: 'v0' },
            harness: { version: result.rollouts.harnessVersion },
            metrics: { rollouts: 12 },
          });
          // Filterable in the UI: the run, the iteration, the stage; the memo says what produced it.
          const described = await handle.describe();
          expect(described.searchAttributes).toMatchObject({
            ReinRunId: ['run-a'],
            ReinIteration: [1],
            ReinStage: ['done'],
            ReinPolicyVersion: ['run-a.v1'],
          });
          expect(described.memo).toMatchObject({
            configHash: 'c0nf1g',
            harnessVersion: result.rollouts.harnessVersion,
          });
          await replayAndRecord(await handle.fetchHistory(), 'training-iteration.json');

          // The same iteration again (a restarted run): finished rollouts are read back and the batch is not trained
          // twice.
          const again = await client.workflow.execute('trainingIteration', {
            taskQueue,
            workflowId: `run-a-it1-again-${randomUUID()}`,
            args: [input],
          });
          expect(again.update).toMatchObject({ version: 'run-a.v1', reused: true });
          expect(again.batch.contentHash).toBe(result.batch.contentHash);
          expect(await registry.list({ runId: 'run-a' })).toHaveLength(1);
        });
      } finally {
        await close();
      }
    },
  );

  it(
    'trains with the PyTorch engine: a LoRA adapter on the base, registered as one and served merged; bad trainer input fails the update at once, registering nothing',
    { timeout: 300_000 },
    async () => {
      const pytorch = reinConfigSchema.parse({
        trainer: {
          engine: 'pytorch',
          epochs: 1,
          pytorch: { python: setupPython(), lora: { rank: 4, alpha: 8, learningRate: 0.003 } },
        },
      }).trainer;
      const { worker, client, taskQueue, close } = await startWorker(
        'pytorch',
        localPolicyTrainer(pytorch, path.join(dir, 'logs')),
      );
      const input = iterationInput('run-torch', [6, 8], 2);
      try {
        await worker.runUntil(async () => {
          const result = await client.workflow.execute('trainingIteration', {
            taskQueue,
            workflowId: `run-torch-it1-${randomUUID()}`,
            args: [input],
          });
          expect(result.update).toMatchObject({ version: 'run-torch.v1', reused: false });
          const base = path.join(packageRoot(), 'models', 'base');
          expect(await registry.get('run-torch.v1')).toMatchObject({
            parent: 'v0',
            format: 'lora',
            baseCheckpointUri: base,
          });
          const checkpoint = (await registry.get('run-torch.v1'))?.checkpointUri as string;
          expect(JSON.parse(readFileSync(path.join(checkpoint, 'adapter_config.json'), 'utf8'))).toMatchObject({
            peft_type: 'LORA',
            r: 4,
            base_model_name_or_path: base,
          });
          expect(stack.policyServer.models()).toContain('run-torch.v1');
          const replayed = (await stack.store.listRollouts({ mode: 'eval' })).items.find((r) =>
            r.id.startsWith('heldout.run-torch.v1.'),
          );
          expect(
            (await stack.store.listCalls(replayed?.id as string)).every((c) => c.policyVersion === 'run-torch.v1'),
          ).toBe(true);
        });
      } finally {
        await close();
      }

      // A LoRA target the model does not have: the trainer refuses (exit 2), the update is not retried, nothing is
      // registered.
      const wrong = reinConfigSchema.parse({
        trainer: { engine: 'pytorch', pytorch: { python: setupPython(), lora: { targetModules: ['attn_qkv'] } } },
      }).trainer;
      const refused = await startWorker('pytorch-bad', localPolicyTrainer(wrong, path.join(dir, 'logs')));
      try {
        await refused.worker.runUntil(async () => {
          const started = Date.now();
          const failure = await refused.client.workflow
            .execute('trainingIteration', {
              taskQueue: refused.taskQueue,
              workflowId: `run-bad-it1-${randomUUID()}`,
              args: [{ ...input, runId: 'run-bad', heldout: undefined }],
            })
            .catch((err: unknown) => err);
          const messages: string[] = [];
          for (
            let err = failure as { message?: string; cause?: unknown } | undefined;
            err;
            err = err.cause as typeof err
          )
            messages.push(err.message ?? '');
          expect(messages.join(' <- ')).toMatch(/refused the update: rein-trainer: .*attn_qkv/);
          expect(Date.now() - started).toBeLessThan(120_000);
          expect(await registry.list({ runId: 'run-bad' })).toHaveLength(0);
        });
      } finally {
        await refused.close();
      }
    },
  );

  it(
    'runs iterations as child workflows from production and then from the policy each one produced; pauses, resumes and stops on signals',
    { timeout: 240_000 },
    async () => {
      // Production's version (run-a.v1) is in S3: this worker shares that store and stages it as the parent.
      const { worker, client, taskQueue, close } = await startWorker('run', undefined, s3Artifacts);
      // What serves production now (say an earlier run's candidate was promoted) is where this run starts.
      await registry.setAlias('production', 'run-a.v1', {
        operation: 'promote',
        actor: 'test',
        override: true,
        reason: 'set up the test',
      });
      const train = loadTaskSet(path.join(example, 'train.jsonl'));
      const input: TrainingRunInput = {
        runId: 'run-b',
        configHash: 'c0nf1g',
        base: { version: 'v0', checkpointUri: path.join(packageRoot(), 'models', 'base') },
        startFrom: 'production',
        iterations: null,
        train: {
          taskSet: { file: train.file, sha256: train.sha256 },
          taskIds: train.tasks.slice(0, 12).map((t) => t.id),
          tasksPerIteration: 4,
          samplesPerTask: 2,
        },
        onFailedIteration: 'stop',
      };
      try {
        await worker.runUntil(async () => {
          const handle = await client.workflow.start('trainingRun', {
            taskQueue,
            workflowId: `run-b-${randomUUID()}`,
            args: [input],
          });
          await handle.signal(pauseSignal);
          const until = async (check: (s: RunStatus) => boolean) => {
            for (;;) {
              const status = await handle.query(statusQuery);
              if (check(status)) return status;
              // A run that ended (failed) will never get there: show why.
              if ((await handle.describe()).status.name !== 'RUNNING') return handle.result();
              await new Promise((r) => setTimeout(r, 200));
            }
          };
          const paused = await until((s) => s.state === 'paused' && s.stage === 'paused');
          expect(paused.iterations.length).toBeLessThanOrEqual(1);
          await handle.signal(resumeSignal);
          await until((s) => s.nextIteration >= 2);
          await handle.signal(stopSignal);
          const final = await handle.result();
          expect(final.state).toBe('stopped');
          expect(final.iterations.map((i: RunStatus['iterations'][number]) => i.candidate)).toEqual([
            'run-b.v1',
            'run-b.v2',
          ]);
          // Each iteration trained from the one before: the registry's lineage is a chain from production.
          expect((await registry.list({ runId: 'run-b' })).map((p) => [p.version, p.parent, p.iteration])).toEqual([
            ['run-b.v1', 'run-a.v1', 1],
            ['run-b.v2', 'run-b.v1', 2],
          ]);
          // The iterations are child workflows the UI can list by the run's search attribute.
          const children: string[] = [];
          for await (const w of client.workflow.list({
            query: `ReinRunId = 'run-b' AND WorkflowType = 'trainingIteration'`,
          }))
            children.push(w.workflowId);
          expect(children.sort()).toEqual(['run-b-it1', 'run-b-it2']);
          await replayAndRecord(await handle.fetchHistory(), 'training-run.json');
        });
      } finally {
        await close();
      }
    },
  );
});
