import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import type { Activities } from '../../activities/index.js';
import { withRolloutIds } from '../../activities/batch-selection.js';
import type { RunRolloutsInput } from '../../activities/run-rollouts.js';
import type { UpdatePolicyInput } from '../../activities/update-policy.js';
import { createLogger } from '../../src/log/logger.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { PolicyUpdateFailure } from '../../workflows/failures.js';
import type { TrainingRunInput } from '../../workflows/index.js';
import { testClient } from './temporal.js';

/**
 * A training run's workflows with stub activities that record each call and which workflow made
 * it: the run's paths (failures, schedules, continue-as-new) on the shared dev server, in seconds.
 */

export type StubbedName =
  | 'registerBasePolicy'
  | 'productionPolicy'
  | 'runRollouts'
  | 'buildBatch'
  | 'updatePolicy'
  | 'gateCandidate'
  | 'promotePolicy'
  | 'recordLedgerEntry';
export type Stubs = Pick<Activities, StubbedName>;
export interface Call {
  activity: StubbedName;
  workflowId: string;
  input: unknown;
}

/** A policy's stubbed mean reward: the base 0.2, version `<run>.vN` 0.2 + N/10. */
export const rewardOf = (version: string | null) =>
  Math.round((0.2 + Number(/\.v(\d+)$/.exec(version ?? '')?.[1] ?? 0) / 10) * 100) / 100;

/** A set's summary: every rollout succeeded with its policy's stubbed reward. */
function stubRolloutSummary(input: RunRolloutsInput) {
  const total = input.taskIds.length * input.samplesPerTask;
  const meanReward = rewardOf(input.policyVersion);
  return {
    batchId: input.batchId,
    harnessVersion: 'stub-harness',
    total,
    byStatus: { succeeded: total },
    byFailureClass: {},
    meanReward,
    unscored: 0,
    rewardDisagreements: 0,
    meanRewardByTask: Object.fromEntries(input.taskIds.map((t) => [t, meanReward])),
  };
}

export function stubActivities(
  hooks: {
    updatePolicy?: (input: UpdatePolicyInput) => Promise<void> | void;
    runRollouts?: (input: RunRolloutsInput) => Promise<void> | void;
  } = {},
) {
  const calls: Call[] = [];
  let production: string | undefined;
  const record = (activity: StubbedName, input: unknown) =>
    calls.push({ activity, workflowId: Context.current().info.workflowExecution?.workflowId ?? '', input });
  const activities: Stubs = {
    async registerBasePolicy(input) {
      record('registerBasePolicy', input);
    },
    async productionPolicy(input) {
      record('productionPolicy', input);
      production ??= input.base.version;
      return production;
    },
    async runRollouts(input) {
      record('runRollouts', input);
      await hooks.runRollouts?.(input);
      return stubRolloutSummary(input);
    },
    async buildBatch(input) {
      record('buildBatch', input);
      const artifact = (name: string) => ({
        uri: `file:///stub/${input.runId}/${input.iteration}/${name}`,
        sha256: `sha-${input.iteration}`,
        bytes: 1,
      });
      return {
        batch: { ...artifact('batch.safetensors'), contentHash: `content-${input.runId}-${input.iteration}` },
        report: artifact('batch-report.json'),
        summary: {
          rolloutsUsed: withRolloutIds(input).rolloutIds.length,
          rolloutsExcluded: 0,
          sequences: withRolloutIds(input).rolloutIds.length,
          trainedTokens: 10,
          meanReward: 0.5,
          mergeRate: 1,
          driftRate: 0,
        },
      };
    },
    async updatePolicy(input) {
      record('updatePolicy', input);
      await hooks.updatePolicy?.(input);
      return {
        version: input.newVersion,
        parent: input.parentVersion,
        checkpointUri: `file:///stub/${input.newVersion}`,
        steps: 1,
        approxKl: 0,
        clipFraction: 0,
        reused: false,
        seconds: 0,
      };
    },
    async gateCandidate(input) {
      record('gateCandidate', input);
      return { decisionId: input.decisionId, verdict: 'pass', reasons: ['stub gate'] };
    },
    async promotePolicy(input) {
      record('promotePolicy', input);
      const from = production ?? null;
      production = input.version;
      return { from, to: input.version, gatewayUpdated: true };
    },
    async recordLedgerEntry(input) {
      record('recordLedgerEntry', input);
    },
  };
  const of = <N extends StubbedName>(activity: N) =>
    calls.filter((c) => c.activity === activity) as Array<Omit<Call, 'input'> & { input: Parameters<Stubs[N]>[0] }>;
  return { activities, calls, of };
}

/** Runs `fn` while a worker with the real workflows and these stub activities polls a fresh task queue. */
export async function withStubWorker<T>(
  activities: Partial<Activities>,
  fn: (ctx: { client: Client; taskQueue: string }) => Promise<T>,
): Promise<T> {
  // The failures these tests cause on purpose are logged at warn.
  installTemporalRuntime(createLogger('error'));
  const taskQueue = `run-paths-${randomUUID()}`;
  const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
  const { client, connection: clientConnection } = await testClient();
  try {
    const worker = await Worker.create({
      connection,
      taskQueue,
      workflowBundle: { code: inject('workflowBundleCode') },
      activities,
    });
    return await worker.runUntil(fn({ client, taskQueue }));
  } finally {
    await clientConnection.close();
    await connection.close();
  }
}

export const trainTasks = {
  taskSet: { file: '/stub/train.jsonl', sha256: 'train-sha' },
  taskIds: ['t1', 't2', 't3'],
  tasksPerIteration: 2,
  samplesPerTask: 2,
};
export const heldoutTasks = { taskSet: { file: '/stub/heldout.jsonl', sha256: 'heldout-sha' }, taskIds: ['h1', 'h2'] };

export function runInput(runId: string, more: Partial<TrainingRunInput>): TrainingRunInput {
  return {
    runId,
    configHash: 'cfg',
    base: { version: 'v0', checkpointUri: 'file:///stub/v0' },
    startFrom: 'base',
    iterations: 3,
    train: trainTasks,
    onFailedIteration: 'stop',
    ...more,
  };
}

export const refused = (iteration: number) =>
  new PolicyUpdateFailure(`trainer refused the batch of iteration ${iteration}`);

export async function waitFor(what: string, check: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The run ids of a workflow's executions, first to last, following its continue-as-new events. */
export async function executionChain(client: Client, workflowId: string, firstRunId: string): Promise<string[]> {
  const chain = [firstRunId];
  for (;;) {
    const history = await client.workflow.getHandle(workflowId, chain.at(-1)).fetchHistory();
    const next = history.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
    if (!next) return chain;
    chain.push(next);
  }
}

export async function executionStatus(client: Client, workflowId: string): Promise<string> {
  return (await client.workflow.getHandle(workflowId).describe()).status.name;
}
