/**
 * A training run on the embedded default, as `rein train` runs it (Temporal dev server, policy
 * server, gateway and worker in this process; the example agent from
 * examples/calculator-agent/rein.yaml, or another of its configs), on free ports and a scratch
 * data directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { startRun, trainingRunInput, type RunReport } from '../src/client/runs.js';
import { followRun } from '../src/cli/follow-run.js';
import { startServices } from '../src/cli/services.js';
import { loadConfig } from '../src/config/load.js';
import type { ReinConfig } from '../src/config/schema.js';
import { createLogger } from '../src/log/logger.js';
import { packageRoot } from '../src/package-root.js';
import type { MergeMode } from '../src/samples/merge-modes.js';
import { freePort } from '../test/helpers/ports.js';

export interface EmbeddedRunOptions {
  /** The example's config file in examples/calculator-agent (default rein.yaml). */
  configFile?: string;
  /** Replaces the config's `environment` keys given (its variants: an array replaces the file's). */
  environment?: Record<string, unknown>;
  iterations: number;
  tasks: number;
  samples: number;
  heldoutLimit?: number | undefined;
  /** Without held-out tasks: no replay at all. */
  heldout?: boolean;
  heldoutEvery?: number | undefined;
  learningRate?: number | undefined;
  epochs?: number | undefined;
  concurrency?: number | undefined;
  /** Train on groups whose rewards are all equal (tiny runs that measure orchestration, not learning). */
  keepZeroVarianceGroups?: boolean;
  /** samples.merge (default exact). */
  merge?: MergeMode | undefined;
  /** AGENT_SEED for the example agent: its sampling the same in runs compared side by side. */
  agentSeed?: string | undefined;
  /** run.schedule (default sync). */
  schedule?: 'sync' | 'async';
  maxVersionsBehind?: number;
  importanceWeightCap?: number;
}

export interface EmbeddedRun {
  runId: string;
  /** The config the run was started with (its stores are in workDir). */
  config: ReinConfig;
  report: RunReport;
  seconds: number;
  client: Client;
  workDir: string;
  close(options?: { keep?: boolean }): Promise<void>;
}

export async function embeddedTrainingRun(options: EmbeddedRunOptions): Promise<EmbeddedRun> {
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-bench-run-'));
  const { config } = loadConfig({
    file: path.join(packageRoot(), 'examples', 'calculator-agent', options.configFile ?? 'rein.yaml'),
    env: {},
    overrides: {
      dataDir: workDir,
      log: { level: 'warn' },
      temporal: { devServer: { ip: '127.0.0.1', port: await freePort(), uiPort: await freePort(), headless: true } },
      gateway: { port: await freePort() },
      policyServer: { port: await freePort() },
      ...(options.environment && { environment: options.environment }),
      ...(options.concurrency && { rollouts: { concurrency: options.concurrency } }),
      ...(options.agentSeed && { harness: { local: { env: { AGENT_SEED: options.agentSeed } } } }),
      samples: {
        ...(options.keepZeroVarianceGroups && { zeroVarianceGroups: 'keep' }),
        ...(options.merge && { merge: options.merge }),
        ...(options.maxVersionsBehind !== undefined && { maxVersionsBehind: options.maxVersionsBehind }),
        ...(options.importanceWeightCap !== undefined && { importanceWeightCap: options.importanceWeightCap }),
      },
      trainer: {
        ...(options.learningRate && { learningRate: options.learningRate }),
        ...(options.epochs && { epochs: options.epochs }),
      },
      run: {
        iterations: options.iterations,
        tasksPerIteration: options.tasks,
        samplesPerTask: options.samples,
        ...(options.heldoutLimit && { heldoutLimit: options.heldoutLimit }),
        ...(options.heldoutEvery && { heldoutEvery: options.heldoutEvery }),
        ...(options.schedule && { schedule: options.schedule }),
      },
    },
  });
  const services = await startServices(config, createLogger('warn'));
  const client = services.temporal.temporal.client;
  const runId = 'bench';
  const started = performance.now();
  const run = options.heldout === false ? { ...config.run, heldoutTasks: undefined } : config.run;
  await startRun(
    client,
    config.temporal.taskQueue,
    { ...trainingRunInput({ ...config, run }), runId },
    { ...config, run },
  );
  const report = await followRun(client, runId, { out: process.stderr });
  return {
    runId,
    config,
    report,
    seconds: (performance.now() - started) / 1000,
    client,
    workDir,
    async close({ keep = false } = {}) {
      await services.shutdown();
      if (!keep) rmSync(workDir, { recursive: true, force: true });
    },
  };
}
