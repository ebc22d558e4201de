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

const example = path.join(packageRoot(), 'examples', 'files-agent');
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-files-variants-'));
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

/** The example's programs; the harness grounded, as embedded.yaml runs it on the embedded policy. */
const program = (script: string, env: Record<string, string> = {}) => ({
  command: process.execPath,
  args: [path.join(example, script), '{task}', '{output}'],
  env,
  envAllow: ['PATH', 'HOME'],
  timeoutSeconds: 60,
  taskOnStdin: false,
});

/** A rollout's reward as the verifier gave it, read back from its events. */
async function rewardOf(rolloutId: string) {
  const events = await stack.store.listEvents(rolloutId);
  const reward = events.find((e) => e.type === 'reward');
  return reward?.payload as { value: number; components: Record<string, number> } | undefined;
}

describe('the files example iterates with variants (real dev server, embedded policy, grounded harness)', () => {
  it(
    'checks each variant with fresh rollouts, gives each a verdict, and scores variant training tasks with its verifier',
    { timeout: 180_000 },
    async () => {
      installTemporalRuntime(createLogger('warn'));
      const taskQueue = `files-variants-${randomUUID()}`;
      const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
      const { client, connection: clientConnection } = await testClient();
      const registry = await openRegistry({ dataDir: dir, postgresUrl: null });
      const ledger = await openLedger({ dataDir: dir, postgresUrl: null });
      const base = path.join(packageRoot(), 'models', 'base');
      await registry.register({
        version: 'v0',
        parent: null,
        runId: null,
        iteration: null,
        checkpointUri: base,
        batchContentHash: null,
        trainerMetrics: {},
      });
      const environment = environmentSchema.parse({
        module: path.join(example, 'environment.mjs'),
        variants: [
          { name: 'three-services', state: { services: 3 } },
          { name: 'flaky-reads', rules: { transientErrors: { every: 3, tools: ['read_file'] } } },
        ],
        validation: { samples: 2, tasks: 1 },
        // Every training task runs in a variant when one is kept.
        curriculum: { share: 1 },
      });
      const worker = await createReinWorker({
        connection,
        namespace: 'default',
        taskQueue,
        workflowBundle: { code: inject('workflowBundleCode') },
        dataDir: dir,
        store: stack.store,
        artifacts: new LocalArtifactStore(path.join(dir, 'artifacts')),
        runs: fixedRunDeps({
          samples: { ...config.samples, zeroVarianceGroups: 'keep' },
          rollouts: { ...config.rollouts, concurrency: 8, hiddenFields: ['answer'] },
          harness: {
            version: 'files-grounded',
            local: program('harness.mjs', { AGENT_GROUNDED: '1', AGENT_MAX_TURNS: '3' }),
          },
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
      const train = loadTaskSet(path.join(example, 'starter-train.jsonl'));
      const heldout = loadTaskSet(path.join(example, 'starter-heldout.jsonl'));
      const input: TrainingIterationInput = {
        runId: 'run-files',
        iteration: 1,
        policyVersion: 'v0',
        configHash: 'c0nf1g',
        environmentVariants: true,
        train: {
          taskSet: { file: train.file, sha256: train.sha256 },
          taskIds: ['starter-train-0', 'starter-train-1'],
          samplesPerTask: 2,
        },
        heldout: { taskSet: { file: heldout.file, sha256: heldout.sha256 }, taskIds: ['starter-heldout-0'] },
        release: { samplesPerTask: 1, promote: false, base: { version: 'v0', checkpointUri: base } },
      };
      let result: TrainingIterationResult | undefined;
      try {
        result = await worker.runUntil(
          client.workflow.execute('trainingIteration', {
            taskQueue,
            workflowId: `files-it1-${randomUUID()}`,
            args: [input],
          }),
        );
        const row = await ledger.get('run-files.it1');
        expect(row?.environment.module).toMatch(/^files@files-env-1:/);
      } finally {
        await clientConnection.close();
        await connection.close();
        await registry.close();
        await ledger.close();
      }
      // Each variant was checked on the first training task × 2 fresh samples, each scored by the verifier.
      const all = (await stack.store.listRollouts({ mode: 'train', limit: 500 })).items;
      const validation = all.filter((r) => r.id.startsWith('run-files.it1-validate.'));
      expect(validation.map((r) => r.taskId).sort()).toEqual([
        'starter-train-0:flaky-reads',
        'starter-train-0:flaky-reads',
        'starter-train-0:three-services',
        'starter-train-0:three-services',
      ]);
      for (const rollout of validation)
        expect(Object.keys((await rewardOf(rollout.id))?.components ?? {}).sort()).toEqual(['format', 'success']);
      // A verdict per variant, with its reason in words, kept or not, and its record written.
      const verdicts = result?.variants?.verdicts ?? [];
      expect(verdicts.map((v) => v.name)).toEqual(['three-services', 'flaky-reads']);
      for (const verdict of verdicts) {
        expect(verdict.reason).toMatch(verdict.kept ? /^solved by \d of 2 samples: kept$/ : /sample/);
        expect(existsSync(fileURLToPath(verdict.uri))).toBe(true);
      }
      // Training kept its budget; each rollout ran in its variant (or the original) and the verifier scored it.
      const kept = verdicts.filter((v) => v.kept);
      const trained = all.filter((r) => r.id.startsWith('run-files.it1.'));
      expect(trained).toHaveLength(4);
      expect(result?.variants?.variantTasks).toBe(kept.length > 0 ? 2 : 0);
      for (const rollout of trained) {
        const events = await stack.store.listEvents(rollout.id);
        const session = events.find((e) => e.type === 'custom' && e.payload.name === ENVIRONMENT_EVENT);
        const variant = rollout.taskId?.split(':')[1];
        expect((session?.payload.data as { variant: string | null }).variant).toBe(
          kept.find((v) => v.name === variant)?.id ?? null,
        );
        expect([0, 1]).toContain((await rewardOf(rollout.id))?.components.success);
      }
    },
  );
});
