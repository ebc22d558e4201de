import { randomBytes } from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { ConfigError } from '../config/load.js';
import type { ReinConfig, RunSettings } from '../config/schema.js';
import { importanceSamplingOf } from '../samples/importance-sampling.js';
import { configHash } from '../config/config-hash.js';
import { loadTaskSet } from '../rollouts/tasks.js';
import { variesEnvironment } from '../environments/settings.js';
import type { TrainingIterationInput, TrainingRunInput, trainingRun } from '../../workflows/index.js';
import { promotionMemo, refuseConcurrentPromotion, type PromotionGuard } from './promotion-guard.js';
import { RunExistsError } from './run-errors.js';
import { harnessVersionOf, storeConfigOfStart } from './run-config.js';
import type { RunExecution } from './run-executions.js';

// Starting, listing and following runs: the modules beside this one, exported here as one API.
export { completedRunMessage, continueRun, resumeRun, type RunContinuation } from './continue-run.js';
export { promotionGuard, promotionMemo, type PromotionGuard } from './promotion-guard.js';
export { cancelRun, signalRun } from './run-control.js';
export {
  isTemporalUnreachable,
  PromotionConflictError,
  RunExistsError,
  RunNotFoundError,
  RunNotResumableError,
} from './run-errors.js';
export {
  describeRun,
  describeStage,
  runExecutionStatus,
  workerIsPolling,
  type RunReport,
  type RunResume,
  type StageActivity,
} from './run-status.js';

/** What the command line may change about the config's `run` section. */
export interface RunOverrides {
  runId?: string | undefined;
  iterations?: number | null | undefined;
  tasksPerIteration?: number | undefined;
  samplesPerTask?: number | undefined;
  heldoutLimit?: number | undefined;
}

export type RunStart = TrainingRunInput & { runId: string };

/**
 * What a run id may be. It names the run's workflows, its policy versions (`<run>.v<n>`) and its
 * rollouts (`<run>.it<n>.<task>.<sample>`, at most 128 characters), so it is short and plain.
 */
export const RUN_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const RUN_ID_RULE = '1 to 64 letters, digits, dots, dashes and underscores, starting with a letter or digit';

/** A run id that sorts by start time and does not collide: run-20261201-0531-a3f9. */
export function newRunId(now = new Date()): string {
  const stamp = now.toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '-');
  return `run-${stamp}-${randomBytes(2).toString('hex')}`;
}

/**
 * The config's held-out tasks (the first `limit`, default run.heldoutLimit), pinned by content
 * hash, with the harness's eval settings; undefined when the config names none.
 */
export function heldoutSelection(run: RunSettings, limit = run.heldoutLimit): TrainingIterationInput['heldout'] {
  if (!run.heldoutTasks) return undefined;
  const heldout = loadTaskSet(run.heldoutTasks);
  return {
    taskSet: { file: heldout.file, sha256: heldout.sha256 },
    taskIds: heldout.tasks.slice(0, limit ?? heldout.tasks.length).map((t) => t.id),
    ...(Object.keys(run.evalHarnessEnv).length > 0 && { harnessEnv: run.evalHarnessEnv }),
  };
}

/**
 * The trainingRun input from the config (and command-line overrides): task sets pinned by their
 * content hash, the base policy, sizes. Only references travel: the tasks stay in their files.
 */
export function trainingRunInput(
  config: ReinConfig,
  overrides: RunOverrides = {},
  source = 'config',
): TrainingRunInput {
  const run = { ...config.run };
  if (overrides.iterations !== undefined) run.iterations = overrides.iterations;
  if (overrides.tasksPerIteration !== undefined) run.tasksPerIteration = overrides.tasksPerIteration;
  if (overrides.samplesPerTask !== undefined) run.samplesPerTask = overrides.samplesPerTask;
  if (overrides.heldoutLimit !== undefined) run.heldoutLimit = overrides.heldoutLimit;
  const see = 'see examples/calculator-agent/rein.yaml for a complete example';
  const problems = [
    !config.harness && `harness: not set; expected the program Rein runs on each task (${see})`,
    !config.verifier && `verifier: not set; expected the program that scores a harness run (${see})`,
    !run.trainTasks && `run.trainTasks: not set; expected a JSONL task set to train on (${see})`,
    ...asyncScheduleProblems(config),
  ].filter((p): p is string => typeof p === 'string');
  if (problems.length > 0) throw new ConfigError(source, problems);
  const train = loadTaskSet(run.trainTasks as string);
  if (run.tasksPerIteration > train.tasks.length) {
    // Taking the same task twice in one iteration would only repeat its group.
    throw new ConfigError(source, [
      `run.tasksPerIteration (or --tasks): ${run.tasksPerIteration} is more than the ${train.tasks.length} tasks in ${train.file}; use at most ${train.tasks.length}`,
    ]);
  }
  const heldout = heldoutSelection(run);
  return {
    ...(overrides.runId && { runId: overrides.runId }),
    configHash: configHash(config),
    ...harnessVersionOf(config),
    base: { version: run.base.version, checkpointUri: run.base.checkpoint as string },
    startFrom: run.startFrom,
    iterations: run.iterations,
    train: {
      taskSet: { file: train.file, sha256: train.sha256 },
      taskIds: train.tasks.map((t) => t.id),
      tasksPerIteration: run.tasksPerIteration,
      samplesPerTask: run.samplesPerTask,
    },
    ...(heldout && { heldout }),
    heldoutEvery: run.heldoutEvery,
    release: { samplesPerTask: config.gate.samplesPerTask, promote: config.gate.autoPromote },
    heartbeatTimeoutSeconds: run.heartbeatTimeoutSeconds,
    // Absent for sync, as in the input of runs started before schedules existed.
    ...(run.schedule === 'async' && { schedule: run.schedule }),
    shards: config.rollouts.shard,
    ...(variesEnvironment(config.environment) && { environmentVariants: true }),
    onFailedIteration: run.onFailedIteration,
    maxIterationTries: run.maxIterationTries,
  };
}

/**
 * Starts a training run; its workflow id is the run id. The config the input was built from is
 * stored in the artifact store first (workers load the run's harness and settings from it). With
 * a guard, a run that promotes is refused while another run promotes into the same alias
 * (PromotionConflictError).
 */
export async function startRun(
  client: Client,
  taskQueue: string,
  input: RunStart,
  config: ReinConfig,
  guard?: PromotionGuard,
): Promise<{ runId: string; executionRunId: string }> {
  const { promotes } = promotionMemo(input, guard);
  if (promotes && !guard?.allowConcurrent) await refuseConcurrentPromotion(client, input.runId, promotes);
  await storeConfigOfStart(config, input.configHash);
  try {
    const handle = await client.workflow.start<typeof trainingRun>('trainingRun', {
      taskQueue,
      workflowId: input.runId,
      // A run id names one run: its candidates and rollouts are named after it.
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      args: [input],
      memo: { configHash: input.configHash, ...(promotes && { promotes }) },
      staticSummary: `Rein training run ${input.runId}: ${input.iterations ?? 'unbounded'} iterations from ${input.base.version}`,
    });
    return { runId: input.runId, executionRunId: handle.firstExecutionRunId };
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      throw new RunExistsError(
        `a run named ${input.runId} already exists; follow it with \`rein status ${input.runId}\`, or choose another --run-id`,
      );
    }
    throw err;
  }
}

export interface RunListing {
  runId: string;
  /** Temporal's execution status: Running, Completed, Failed, Terminated, Canceled, TimedOut. */
  execution: string;
  startTime: Date;
  closeTime: Date | undefined;
  stage: string | undefined;
  policyVersion: string | undefined;
}

export { RUN_EXECUTIONS } from './run-executions.js';

/** Which runs to list: a page (`limit` from `offset`), by execution status and by text in the run id. */
export interface RunListFilter {
  limit?: number;
  offset?: number;
  execution?: RunExecution;
  /** Part of the run id, any case. */
  search?: string;
}

/**
 * The newest training runs first (by start), from Temporal's visibility store, a page at a time, with how many
 * match. The store lists open executions first and closed ones by close time, and its SQL flavours take no ORDER
 * BY: all runs are read, filtered and sorted here.
 */
export async function listRuns(
  client: Client,
  { limit = 20, offset = 0, execution, search }: RunListFilter = {},
): Promise<{ items: RunListing[]; total: number }> {
  const runs: RunListing[] = [];
  const query = `WorkflowType = 'trainingRun' AND ExecutionStatus != 'ContinuedAsNew'`;
  const needle = search?.toLowerCase();
  for await (const wf of client.workflow.list({ query, pageSize: 100 })) {
    const attribute = (name: string) => (wf.searchAttributes[name] as string[] | undefined)?.[0];
    const runId = attribute('ReinRunId') ?? wf.workflowId;
    if (execution && wf.status.name !== execution) continue;
    if (needle && !runId.toLowerCase().includes(needle)) continue;
    runs.push({
      runId,
      execution: wf.status.name,
      startTime: wf.startTime,
      closeTime: wf.closeTime,
      stage: attribute('ReinStage'),
      policyVersion: attribute('ReinPolicyVersion'),
    });
  }
  runs.sort((a, b) => b.startTime.getTime() - a.startTime.getTime());
  return { items: runs.slice(offset, offset + limit), total: runs.length };
}

/**
 * What run.schedule async needs: its samples come from the version before the one they train, so
 * they must be allowed one version behind, and corrected for it.
 */
function asyncScheduleProblems(config: ReinConfig): string[] {
  if (config.run.schedule !== 'async') return [];
  const { samples } = config;
  return [
    variesEnvironment(config.environment) &&
      'run.schedule async: environment variants (declared, or proposed by the rigger) are mixed into training with the sync schedule only; remove environment.variants and set environment.rigger.proposals: 0, or use run.schedule sync',
    (samples.maxVersionsBehind ?? 0) < 1 &&
      `run.schedule async: samples.maxVersionsBehind is ${samples.maxVersionsBehind ?? 'unset'}, but each iteration trains on rollouts sampled one version behind; set samples.maxVersionsBehind: 1 (or more)`,
    importanceSamplingOf(samples) === undefined &&
      'run.schedule async: no importance correction is set, so stale samples would train uncorrected; set samples.importanceWeightCap (e.g. 2: each token weighed by min(pi_parent / pi_behaviour, cap)) or samples.importanceSampling (masked importance sampling)',
  ].filter((p): p is string => typeof p === 'string');
}
