import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { fixedRunDeps } from '../../activities/run-deps.js';
import { LocalArtifactStore } from '../../src/artifacts/local-store.js';
import { reinConfigSchema } from '../../src/config/schema.js';
import { EnvironmentServer } from '../../src/environments/server.js';
import { ENVIRONMENT_EVENT } from '../../src/environments/rollout-environment.js';
import { environmentSchema } from '../../src/environments/settings.js';
import { openLedger } from '../../src/ledger/open.js';
import { createLogger } from '../../src/log/logger.js';
import { packageRoot } from '../../src/package-root.js';
import { openRegistry } from '../../src/registry/open.js';
import { loadTaskSet } from '../../src/rollouts/tasks.js';
import { startEmbeddedStack, type EmbeddedStack } from '../../src/training/embedded-stack.js';
import { localPolicyTrainer } from '../../src/training/policy-update.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { createReinWorker } from '../../workers/worker.js';
import type { TrainingIterationInput, TrainingIterationResult } from '../../workflows/index.js';
import { testClient } from '../helpers/temporal.js';

const example = path.join(packageRoot(), 'examples', 'calculator-agent');
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-env-iteration-'));
const config = reinConfigSchema.parse({});
let stack: EmbeddedStack;
let server: EnvironmentServer;

beforeAll(async () => {
  stack = await startEmbeddedStack({ workDir: dir, baseCheckpoint: path.join(packageRoot(), 'models', 'base') });
  server = await EnvironmentServer.start();
});
afterAll(async () => {
  await server.close();
  await stack.close();
  rmSync(dir, { recursive: true, force: true });
});

const program = (script: string) => ({
  command: process.execPath,
  args: [path.join(example, script), '{task}', '{output}'],
  env: {},
  envAllow: ['PATH', 'HOME'],
  timeoutSeconds: 60,
  taskOnStdin: false,
});

describe('an iteration in an environment with variants (real dev server, embedded policy)', () => {
  it(
    'checks the variants with fresh rollouts, trains with the kept ones mixed in, and replays held-out tasks in the original environment',
    { timeout: 180_000 },
    async () => {
      installTemporalRuntime(createLogger('warn'));
      const taskQueue = `env-iteration-${randomUUID()}`;
      const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
      const { client, connection: clientConnection } = await testClient();
      const registry = await openRegistry({ dataDir: dir, postgresUrl: null });
      const ledger = await openLedger({ dataDir: dir, postgresUrl: null });
      await registry.register({
        version: 'v0',
        parent: null,
        runId: null,
        iteration: null,
        checkpointUri: path.join(packageRoot(), 'models', 'base'),
        batchContentHash: null,
        trainerMetrics: {},
      });
      const environment = environmentSchema.parse({
        module: path.join(example, 'environment.mjs'),
        variants: [
          { name: 'worded', observations: { template: 'The calculator says: {observation}' } },
          { name: 'flaky', rules: { transientErrors: { every: 2 } } },
        ],
        validation: { samples: 2, tasks: 1 },
        curriculum: { share: 0.5 },
      });
      const artifacts = new LocalArtifactStore(path.join(dir, 'artifacts'));
      // The rigger proposed a variant after iteration 1 (as its report keeps it): this iteration checks it too.
      const proposed = { name: 'noise-3', observations: { noise: { lines: 3 } } };
      await artifacts.put(
        'runs/run-env/rigger/it1.json',
        JSON.stringify({
          iteration: 1,
          window: [1],
          rollouts: 8,
          weaknesses: [],
          table: '',
          proposals: [
            { id: 'v-x', spec: proposed, why: 'long runs', aimedAt: { kind: 'long_episodes', subject: 'runs' } },
          ],
          unaddressed: [],
        }),
      );
      const worker = await createReinWorker({
        connection,
        namespace: 'default',
        taskQueue,
        workflowBundle: { code: inject('workflowBundleCode') },
        dataDir: dir,
        store: stack.store,
        artifacts,
        runs: fixedRunDeps({
          samples: { ...config.samples, zeroVarianceGroups: 'keep' },
          rollouts: { ...config.rollouts, concurrency: 8 },
          harness: { version: 'example', local: program('harness.mjs') },
          verifier: program('verifier.mjs'),
          environment,
          gate: config.gate,
        }),
        environmentServer: async () => server,
        gateway: stack.control,
        registry,
        ledger,
        trainer: localPolicyTrainer(config.trainer, path.join(dir, 'logs')),
        serving: stack.serving,
        policiesDir: path.join(dir, 'policies'),
      });
      const train = loadTaskSet(path.join(example, 'train.jsonl'));
      const heldout = loadTaskSet(path.join(example, 'heldout.jsonl'));
      const input: TrainingIterationInput = {
        runId: 'run-env',
        iteration: 2,
        policyVersion: 'v0',
        configHash: 'c0nf1g',
        environmentVariants: true,
        train: {
          taskSet: { file: train.file, sha256: train.sha256 },
          taskIds: ['train-0', 'train-1'],
          samplesPerTask: 4,
        },
        heldout: { taskSet: { file: heldout.file, sha256: heldout.sha256 }, taskIds: ['heldout-0', 'heldout-1'] },
        release: {
          samplesPerTask: 1,
          promote: false,
          base: { version: 'v0', checkpointUri: path.join(packageRoot(), 'models', 'base') },
        },
      };
      let result: TrainingIterationResult | undefined;
      try {
        result = await worker.runUntil(
          client.workflow.execute('trainingIteration', {
            taskQueue,
            workflowId: `env-it2-${randomUUID()}`,
            args: [input],
          }),
        );
        // The iteration's ledger row names the environment module and the variants its training ran in.
        const row = await ledger.get('run-env.it2');
        expect(row?.environment.module).toMatch(/^calculator@calculator-env-1:/);
        expect(row?.environment.variants).toEqual(
          result?.variants?.variantTasks ? result.variants.kept.map((k) => k.id).sort() : undefined,
        );
        // Each variant's check is a row of the environment ledger, and the iteration's decision links every one.
        const checks = await ledger.list({ runId: 'run-env', kind: 'variant' });
        expect(checks.map((c) => [c.variant?.name, c.variant?.origin, c.metrics.rollouts])).toEqual([
          ['worded', 'declared', 2],
          ['flaky', 'declared', 2],
          ['noise-3', 'rigger', 2],
        ]);
        for (const check of checks) {
          expect(check.environment.variants).toEqual([check.variant?.id]);
          expect(check.variant?.kept).toBe(result?.variants?.verdicts.find((v) => v.id === check.variant?.id)?.kept);
        }
        const decision = await registry.decision(result!.release!.gate.decisionId);
        expect(decision?.record.environment).toEqual({
          module: row?.environment.module,
          trainedIn: row?.environment.variants ?? [],
          variants: checks.map((c) => ({
            id: c.variant?.id,
            name: c.variant?.name,
            origin: c.variant?.origin,
            kept: c.variant?.kept,
            ledgerId: c.id,
          })),
        });
      } finally {
        await clientConnection.close();
        await connection.close();
        await registry.close();
        await ledger.close();
      }
      // Each variant was checked on one task × 2 fresh samples, in a batch of its own, and its verdict recorded.
      const all = (await stack.store.listRollouts({ mode: 'train', limit: 500 })).items;
      const validation = { items: all.filter((r) => r.id.startsWith('run-env.it2-validate.')) };
      expect(validation.items.map((r) => r.taskId).sort()).toEqual([
        'train-0:flaky',
        'train-0:flaky',
        'train-0:noise-3',
        'train-0:noise-3',
        'train-0:worded',
        'train-0:worded',
      ]);
      expect(result?.variants?.verdicts.map((v) => [v.name, v.origin])).toEqual([
        ['worded', 'declared'],
        ['flaky', 'declared'],
        ['noise-3', 'rigger'],
      ]);
      for (const verdict of result?.variants?.verdicts ?? []) {
        expect(verdict.reason).toMatch(/sample/);
        expect(existsSync(fileURLToPath(verdict.uri))).toBe(true);
      }
      // The training set kept its budget, a share of it run in the kept variants, each rollout in its variant.
      const kept = (result?.variants?.verdicts ?? []).filter((v) => v.kept);
      expect(result?.rollouts.total).toBe(8);
      expect(result?.variants?.variantTasks).toBe(kept.length > 0 ? 1 : 0);
      const trained = { items: all.filter((r) => r.id.startsWith('run-env.it2.')) };
      expect(trained.items).toHaveLength(8);
      for (const rollout of trained.items) {
        const events = await stack.store.listEvents(rollout.id);
        const session = events.find((e) => e.type === 'custom' && e.payload.name === ENVIRONMENT_EVENT);
        const variant = rollout.taskId?.split(':')[1];
        expect((session?.payload.data as { variant: string | null }).variant).toBe(
          kept.find((v) => v.name === variant)?.id ?? null,
        );
      }
      // How training did in each environment, and the rigger's turn on this iteration's rollouts.
      const used = result?.variants?.used ?? [];
      expect(used[0]).toMatchObject({ name: 'original', id: null, origin: 'original' });
      expect(used.reduce((sum, u) => sum + u.rollouts, 0)).toBe(8);
      for (const u of used)
        expect(u.scored === 0 ? u.meanReward : typeof u.meanReward).toBe(u.scored === 0 ? null : 'number');
      expect(result?.variants?.rigger).toMatchObject({ window: [2], uri: expect.stringMatching(/rigger\/it2\.json$/) });
      // Held-out replay ran the original environment.
      const replayed = await stack.store.listRollouts({ mode: 'eval' });
      expect(replayed.items.length).toBe(4);
      for (const rollout of replayed.items) {
        const session = (await stack.store.listEvents(rollout.id)).find(
          (e) => e.type === 'custom' && e.payload.name === ENVIRONMENT_EVENT,
        );
        expect((session?.payload.data as { variant: string | null }).variant).toBeNull();
      }
    },
  );
});
