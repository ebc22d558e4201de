import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalArtifactStore } from '../artifacts/local-store.js';
import type { SampleSettings } from '../config/schema.js';
import { runTrainJob, type TrainJob, type TrainResult } from '../policy/local-trainer.js';
import { localExecutor, type ProgramSpec } from '../rollouts/local-executor.js';
import { runRollouts, type RolloutOutcome, type VerifierSpec } from '../rollouts/runner.js';
import type { Task } from '../rollouts/tasks.js';
import { runBatchStage, type BatchStageResult } from '../samples/stage.js';
import { EMBEDDED_BACKEND } from '../config/embedded-default.js';
import { startEmbeddedStack } from './embedded-stack.js';

/**
 * The whole loop in plain code, on the embedded default: policy server → gateway → harness
 * rollouts → verifier → batch → local trainer → new version served → held-out replay. The
 * Temporal workflows run these same stages as activities; this is the loop without them.
 */
export interface LocalLoopOptions {
  workDir: string;
  baseCheckpoint: string;
  trainTasks: Task[];
  heldoutTasks: Task[];
  iterations: number;
  tasksPerIteration: number;
  samplesPerTask: number;
  harness: ProgramSpec;
  verifier: VerifierSpec;
  /** Variables that make the harness decode greedily for held-out replay (its own settings, e.g. temperature). */
  evalHarnessEnv: Record<string, string>;
  hiddenFields: string[];
  rewardWeights: Record<string, number>;
  concurrency: number;
  samples: SampleSettings;
  trainer: Omit<TrainJob, 'checkpointDir' | 'batchPath' | 'outputDir'>;
  log?: (line: string) => void;
  /** Cancels the run: running harnesses are killed, and the loop stops with an error. */
  signal?: AbortSignal;
}

export interface IterationReport {
  iteration: number;
  policyVersion: string;
  trainSuccess: number;
  meanReward: number | null;
  batch: BatchStageResult['summary'];
  trainer: Pick<TrainResult, 'steps' | 'skippedMinibatches' | 'seconds' | 'metrics'>;
  seconds: { rollouts: number; batch: number; train: number };
}

export interface LocalLoopReport {
  heldout: { before: EvalResult; after: EvalResult };
  iterations: IterationReport[];
  finalPolicy: string;
  seconds: number;
}

export interface EvalResult {
  policyVersion: string;
  successRate: number;
  /** Success per held-out task id, for paired comparisons. */
  perTask: Record<string, number>;
  seconds: number;
}

export async function runLocalLoop(options: LocalLoopOptions): Promise<LocalLoopReport> {
  const started = performance.now();
  const log = options.log ?? (() => undefined);
  mkdirSync(options.workDir, { recursive: true });
  const artifacts = new LocalArtifactStore(path.join(options.workDir, 'artifacts'));
  const stack = await startEmbeddedStack({ workDir: options.workDir, baseCheckpoint: options.baseCheckpoint });
  const { store, policyServer, control } = stack;
  try {
    const checkpoints: Record<string, string> = { v0: options.baseCheckpoint };

    const evaluate = async (policyVersion: string): Promise<EvalResult> => {
      const t0 = performance.now();
      const outcomes = await runRollouts(
        {
          batchId: `heldout-${policyVersion}`,
          tasks: options.heldoutTasks,
          samplesPerTask: 1,
          mode: 'eval',
          policyVersion,
          hiddenFields: options.hiddenFields,
          rewardWeights: options.rewardWeights,
          concurrency: options.concurrency,
          maxAttempts: 2,
          workDir: path.join(options.workDir, 'rollouts'),
          harnessEnv: options.evalHarnessEnv,
        },
        { gateway: control, harness: localExecutor(options.harness), verifier: options.verifier, signal: options.signal },
      );
      throwIfCancelled(options.signal);
      const perTask = Object.fromEntries(outcomes.map((o) => [o.taskId, o.components.success ?? 0]));
      const result = { policyVersion, successRate: mean(Object.values(perTask)), perTask, seconds: (performance.now() - t0) / 1000 };
      log(`held-out ${policyVersion}: ${(100 * result.successRate).toFixed(1)}% (${result.seconds.toFixed(1)} s)`);
      return result;
    };

    const before = await evaluate('v0');
    const iterations: IterationReport[] = [];
    let current = 'v0';
    for (let iteration = 1; iteration <= options.iterations; iteration++) {
      const t0 = performance.now();
      const first = ((iteration - 1) * options.tasksPerIteration) % options.trainTasks.length;
      const tasks = Array.from({ length: options.tasksPerIteration }, (_, i) => options.trainTasks[(first + i) % options.trainTasks.length] as Task);
      const outcomes: RolloutOutcome[] = await runRollouts(
        {
          batchId: `train-${iteration}`,
          tasks,
          samplesPerTask: options.samplesPerTask,
          mode: 'train',
          policyVersion: current,
          hiddenFields: options.hiddenFields,
          rewardWeights: options.rewardWeights,
          concurrency: options.concurrency,
          maxAttempts: 2,
          workDir: path.join(options.workDir, 'rollouts'),
        },
        { gateway: control, harness: localExecutor(options.harness), verifier: options.verifier, signal: options.signal },
      );
      throwIfCancelled(options.signal);
      const t1 = performance.now();
      const batch = await runBatchStage(
        { iteration, policyVersion: current, configHash: 'local-loop', rolloutIds: outcomes.map((o) => o.rolloutId) },
        { store, artifacts, settings: options.samples },
      );
      const t2 = performance.now();
      const next = `v${iteration}`;
      const outputDir = path.join(options.workDir, 'policies', next);
      const trained = await runTrainJob({ ...options.trainer, checkpointDir: checkpoints[current] as string, batchPath: fileURLToPath(batch.batch.uri), outputDir });
      const t3 = performance.now();
      policyServer.load(next, outputDir);
      await control.registerPolicy(next, { backend: EMBEDDED_BACKEND, model: next });
      checkpoints[next] = outputDir;
      const report: IterationReport = {
        iteration,
        policyVersion: next,
        trainSuccess: mean(outcomes.map((o) => o.components.success ?? 0)),
        meanReward: batch.summary.meanReward,
        batch: batch.summary,
        trainer: { steps: trained.steps, skippedMinibatches: trained.skippedMinibatches, seconds: trained.seconds, metrics: trained.metrics },
        seconds: { rollouts: (t1 - t0) / 1000, batch: (t2 - t1) / 1000, train: (t3 - t2) / 1000 },
      };
      iterations.push(report);
      log(
        `iteration ${iteration}: train success ${(100 * report.trainSuccess).toFixed(1)}%, ${batch.summary.sequences} sequences, ` +
          `${trained.steps} steps, kl ${trained.metrics.approxKl.toFixed(4)}, clip ${trained.metrics.clipFraction.toFixed(3)} ` +
          `(rollouts ${report.seconds.rollouts.toFixed(1)} s, batch ${report.seconds.batch.toFixed(1)} s, train ${report.seconds.train.toFixed(1)} s)`,
      );
      // The previous version is no longer sampled from; keep memory flat.
      if (current !== 'v0') policyServer.unload(current);
      current = next;
    }
    const after = await evaluate(current);
    return { heldout: { before, after }, iterations, finalPolicy: checkpoints[current] as string, seconds: (performance.now() - started) / 1000 };
  } finally {
    await stack.close();
  }
}

function throwIfCancelled(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new Error('the training run was cancelled; its rollouts, batches and policies so far are kept in the work directory');
}

function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}
