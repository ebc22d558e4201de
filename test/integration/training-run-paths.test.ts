import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { type Client, WorkflowFailedError } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { describe, expect, inject, it } from 'vitest';
import type { Activities } from '../../activities/index.js';
import type { UpdatePolicyInput } from '../../activities/update-policy.js';
import { createLogger } from '../../src/log/logger.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { IterationFailure, PolicyUpdateFailure } from '../../workflows/failures.js';
import { statusQuery, trainingRun, type RunStatus, type TrainingRunInput } from '../../workflows/index.js';
import { testClient } from '../helpers/temporal.js';
import { withRolloutIds } from '../../activities/batch-selection.js';

/**
 * The paths of a training run that the end-to-end tests do not take (a failed iteration skipped
 * or retried, held-out replay every n-th iteration, continue-as-new): the real workflows on the
 * shared dev server, with stub activities that record each call and which workflow made it.
 */

type StubbedName =
  | 'registerBasePolicy'
  | 'productionPolicy'
  | 'runRollouts'
  | 'buildBatch'
  | 'updatePolicy'
  | 'gateCandidate'
  | 'promotePolicy'
  | 'recordLedgerEntry';
type Stubs = Pick<Activities, StubbedName>;
interface Call {
  activity: StubbedName;
  workflowId: string;
  input: unknown;
}

/** A policy's stubbed mean reward: the base 0.2, version `<run>.vN` 0.2 + N/10. */
const rewardOf = (version: string | null) =>
  Math.round((0.2 + Number(/\.v(\d+)$/.exec(version ?? '')?.[1] ?? 0) / 10) * 100) / 100;

function stubActivities(hooks: { updatePolicy?: (input: UpdatePolicyInput) => Promise<void> | void } = {}) {
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
async function withStubWorker<T>(
  activities: Stubs,
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

const trainTasks = {
  taskSet: { file: '/stub/train.jsonl', sha256: 'train-sha' },
  taskIds: ['t1', 't2', 't3'],
  tasksPerIteration: 2,
  samplesPerTask: 2,
};
const heldoutTasks = { taskSet: { file: '/stub/heldout.jsonl', sha256: 'heldout-sha' }, taskIds: ['h1', 'h2'] };

function runInput(runId: string, more: Partial<TrainingRunInput>): TrainingRunInput {
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

const refused = (iteration: number) => new PolicyUpdateFailure(`trainer refused the batch of iteration ${iteration}`);

async function waitFor(what: string, check: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The run ids of a workflow's executions, first to last, following its continue-as-new events. */
async function executionChain(client: Client, workflowId: string, firstRunId: string): Promise<string[]> {
  const chain = [firstRunId];
  for (;;) {
    const history = await client.workflow.getHandle(workflowId, chain.at(-1)).fetchHistory();
    const next = history.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
    if (!next) return chain;
    chain.push(next);
  }
}

async function executionStatus(client: Client, workflowId: string): Promise<string> {
  return (await client.workflow.getHandle(workflowId).describe()).status.name;
}

describe('training run paths, with stub activities', () => {
  it("onFailedIteration 'skip': a failed iteration is recorded with its cause and the next trains from the last candidate", async () => {
    const runId = `skip-${randomUUID().slice(0, 8)}`;
    const stubs = stubActivities({
      updatePolicy: ({ iteration }) => {
        if (iteration === 2) throw refused(2);
      },
    });
    await withStubWorker(stubs.activities, async ({ client, taskQueue }) => {
      const result = await client.workflow.execute(trainingRun, {
        taskQueue,
        workflowId: runId,
        args: [runInput(runId, { onFailedIteration: 'skip' })],
      });
      expect(result).toMatchObject({ runId, state: 'finished', policyVersion: `${runId}.v3`, nextIteration: 4 });
      expect(result.iterations).toEqual([
        { iteration: 1, candidate: `${runId}.v1`, meanReward: rewardOf('v0'), heldoutMeanReward: null },
        {
          iteration: 2,
          candidate: null,
          meanReward: null,
          heldoutMeanReward: null,
          failed: 'trainer refused the batch of iteration 2',
        },
        { iteration: 3, candidate: `${runId}.v3`, meanReward: rewardOf(`${runId}.v1`), heldoutMeanReward: null },
      ]);
      // The status query says the same as the result.
      expect((await client.workflow.getHandle(runId).query(statusQuery)).iterations).toEqual(result.iterations);

      // Iteration 3 sampled from and trained iteration 1's candidate; iteration 2's failed for good, once.
      expect(stubs.of('updatePolicy').map((c) => [c.workflowId, c.input.parentVersion, c.input.newVersion])).toEqual([
        [`${runId}-it1`, 'v0', `${runId}.v1`],
        [`${runId}-it2`, `${runId}.v1`, `${runId}.v2`],
        [`${runId}-it3`, `${runId}.v1`, `${runId}.v3`],
      ]);
      expect(stubs.of('runRollouts').map((c) => [c.workflowId, c.input.policyVersion, c.input.taskIds])).toEqual([
        [`${runId}-it1`, 'v0', ['t1', 't2']],
        [`${runId}-it2`, `${runId}.v1`, ['t3', 't1']],
        [`${runId}-it3`, `${runId}.v1`, ['t2', 't3']],
      ]);
      expect(await executionStatus(client, `${runId}-it2`)).toBe('FAILED');
      // A failed iteration records no ledger entry; the others do.
      expect(stubs.of('recordLedgerEntry').map((c) => c.input.id)).toEqual([`${runId}.it1`, `${runId}.it3`]);
    });
  });

  it("onFailedIteration 'retry': a failed iteration runs again as <run>-itN-tryK, up to maxIterationTries, then fails the run", async () => {
    const runId = `retry-${randomUUID().slice(0, 8)}`;
    const failedRunId = `retry-out-${randomUUID().slice(0, 8)}`;
    let it2Tries = 0;
    const stubs = stubActivities({
      updatePolicy: ({ runId: run, iteration }) => {
        // `runId` fails iteration 2 once; `failedRunId` fails it every time.
        if (iteration === 2 && (run === failedRunId || ++it2Tries === 1)) throw refused(2);
      },
    });
    await withStubWorker(stubs.activities, async ({ client, taskQueue }) => {
      const result = await client.workflow.execute(trainingRun, {
        taskQueue,
        workflowId: runId,
        args: [runInput(runId, { onFailedIteration: 'retry', maxIterationTries: 2 })],
      });
      expect(result).toMatchObject({ state: 'finished', policyVersion: `${runId}.v3` });
      expect(result.iterations.map((i) => [i.iteration, i.candidate, i.failed])).toEqual([
        [1, `${runId}.v1`, undefined],
        [2, `${runId}.v2`, undefined],
        [3, `${runId}.v3`, undefined],
      ]);
      const mine = stubs.of('updatePolicy').filter((c) => c.input.runId === runId);
      expect(mine.map((c) => [c.workflowId, c.input.parentVersion])).toEqual([
        [`${runId}-it1`, 'v0'],
        [`${runId}-it2`, `${runId}.v1`],
        [`${runId}-it2-try2`, `${runId}.v1`],
        [`${runId}-it3`, `${runId}.v2`],
      ]);
      expect(await executionStatus(client, `${runId}-it2`)).toBe('FAILED');
      expect(await executionStatus(client, `${runId}-it2-try2`)).toBe('COMPLETED');

      // Every try fails: the run fails, naming the iteration, its tries and the cause.
      const failure = await client.workflow
        .execute(trainingRun, {
          taskQueue,
          workflowId: failedRunId,
          args: [runInput(failedRunId, { onFailedIteration: 'retry', maxIterationTries: 2 })],
        })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(failure).toBeInstanceOf(WorkflowFailedError);
      expect((failure as WorkflowFailedError).cause).toMatchObject({
        type: IterationFailure.type,
        nonRetryable: true,
        message: `iteration 2 of run ${failedRunId} failed 2 times: trainer refused the batch of iteration 2`,
      });
      expect(
        stubs
          .of('updatePolicy')
          .filter((c) => c.input.runId === failedRunId)
          .map((c) => c.workflowId),
      ).toEqual([`${failedRunId}-it1`, `${failedRunId}-it2`, `${failedRunId}-it2-try2`]);
      expect(await executionStatus(client, `${failedRunId}-it2-try2`)).toBe('FAILED');
    });
  });

  it('heldoutEvery 2 over 3 iterations: held-out replay, gate and release after iterations 2 and 3 (the last), not 1', async () => {
    const runId = `heldout-${randomUUID().slice(0, 8)}`;
    const stubs = stubActivities();
    await withStubWorker(stubs.activities, async ({ client, taskQueue }) => {
      const input = runInput(runId, {
        heldout: heldoutTasks,
        heldoutEvery: 2,
        release: { samplesPerTask: 2, promote: true },
        heartbeatTimeoutSeconds: 7,
      });
      const result = await client.workflow.execute(trainingRun, { taskQueue, workflowId: runId, args: [input] });
      const [v1, v2, v3] = [1, 2, 3].map((n) => `${runId}.v${n}`) as [string, string, string];

      // Held-out replays by policy: the base before training (the run) and as incumbent of the
      // first release; v2 as candidate and then as incumbent (promoted); v3 as candidate; v1 never.
      const evalRollouts = stubs.of('runRollouts').filter((c) => c.input.mode === 'eval');
      expect(evalRollouts.map((c) => [c.workflowId, c.input.policyVersion])).toEqual([
        [runId, 'v0'],
        [`${runId}-it2-release`, 'v0'],
        [`${runId}-it2-release`, v2],
        [`${runId}-it3-release`, v2],
        [`${runId}-it3-release`, v3],
      ]);
      expect(evalRollouts.every((c) => c.input.samplesPerTask === 2 && c.input.taskIds.join() === 'h1,h2')).toBe(true);
      expect(evalRollouts.some((c) => c.input.policyVersion === v1)).toBe(false);
      expect(stubs.of('gateCandidate').map((c) => [c.input.candidate, c.input.incumbent])).toEqual([
        [v2, 'v0'],
        [v3, v2],
      ]);
      expect(stubs.of('promotePolicy').map((c) => c.input.version)).toEqual([v2, v3]);

      expect(
        result.iterations.map((i) => [
          i.iteration,
          i.heldoutMeanReward,
          i.gate?.verdict,
          i.gate?.promoted,
          i.gate?.incumbent,
        ]),
      ).toEqual([
        [1, null, undefined, undefined, undefined],
        [2, rewardOf(v2), 'pass', true, 'v0'],
        [3, rewardOf(v3), 'pass', true, v2],
      ]);
      expect(result.heldout).toEqual({
        base: {
          policyVersion: 'v0',
          meanReward: rewardOf('v0'),
          meanRewardByTask: { h1: rewardOf('v0'), h2: rewardOf('v0') },
        },
        latest: {
          policyVersion: v3,
          meanReward: rewardOf(v3),
          meanRewardByTask: { h1: rewardOf(v3), h2: rewardOf(v3) },
        },
        // v3 was promoted: production serves it.
        production: {
          policyVersion: v3,
          meanReward: rewardOf(v3),
          meanRewardByTask: { h1: rewardOf(v3), h2: rewardOf(v3) },
        },
      });

      // Every stage of an iteration and of a release, not only rollouts and the update, has the
      // run's heartbeat timeout: a dead worker's stage moves on after it, not after start-to-close.
      const scheduled = async (workflowId: string) =>
        ((await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [])
          .flatMap((e) => (e.activityTaskScheduledEventAttributes ? [e.activityTaskScheduledEventAttributes] : []))
          .map((a) => [a.activityType?.name, Number(a.heartbeatTimeout?.seconds ?? 0)]);
      expect(await scheduled(`${runId}-it2`)).toEqual([
        ['runRollouts', 7],
        ['buildBatch', 7],
        ['updatePolicy', 7],
        ['recordLedgerEntry', 7],
      ]);
      expect(await scheduled(`${runId}-it2-release`)).toEqual([
        ['productionPolicy', 7],
        ['runRollouts', 7],
        ['runRollouts', 7],
        ['gateCandidate', 7],
        ['promotePolicy', 7],
        ['recordLedgerEntry', 7],
        // A one-shot HTTP post bounded by its start-to-close timeout (a minute), retried by Temporal.
        ['notify', 0],
      ]);
    });
  });

  it('continue-as-new carries the run on: iterations, policy version and held-out base survive into the new executions', async () => {
    const runId = `can-${randomUUID().slice(0, 8)}`;
    let releaseIteration3!: () => void;
    const iteration3Released = new Promise<void>((resolve) => (releaseIteration3 = resolve));
    const stubs = stubActivities({
      updatePolicy: ({ iteration }) => (iteration === 3 ? iteration3Released : undefined),
    });
    await withStubWorker(stubs.activities, async ({ client, taskQueue }) => {
      const input = runInput(runId, { heldout: heldoutTasks, continueAsNewEvery: 1 });
      const started = await client.workflow.start(trainingRun, { taskQueue, workflowId: runId, args: [input] });
      const [v1, v2, v3] = [1, 2, 3].map((n) => `${runId}.v${n}`) as [string, string, string];

      // Held in iteration 3's update: by now the run has continued as new twice (after 1 and after 2).
      await waitFor('iteration 3 trains', () => stubs.of('updatePolicy').some((c) => c.input.iteration === 3));
      const handle = client.workflow.getHandle(runId);
      const status: RunStatus = await handle.query(statusQuery);
      expect(status).toMatchObject({
        runId,
        state: 'running',
        stage: 'iteration 3',
        currentWorkflowId: `${runId}-it3`,
        nextIteration: 3,
        policyVersion: v2,
      });
      expect(status.iterations.map((i) => [i.iteration, i.candidate, i.heldoutMeanReward])).toEqual([
        [1, v1, rewardOf(v1)],
        [2, v2, rewardOf(v2)],
      ]);
      expect(status.heldout).toMatchObject({
        base: { policyVersion: 'v0', meanReward: rewardOf('v0') },
        latest: { policyVersion: v2 },
      });
      const running = await executionChain(client, runId, started.firstExecutionRunId);
      expect(running).toHaveLength(3);
      expect((await client.workflow.getHandle(runId, running[0]).describe()).status.name).toBe('CONTINUED_AS_NEW');

      releaseIteration3();
      const result = await started.result();
      expect(result).toMatchObject({ runId, state: 'finished', stage: 'done', nextIteration: 4, policyVersion: v3 });
      expect(result.iterations.map((i) => [i.iteration, i.candidate, i.meanReward])).toEqual([
        [1, v1, rewardOf('v0')],
        [2, v2, rewardOf(v1)],
        [3, v3, rewardOf(v2)],
      ]);
      expect(result.heldout).toMatchObject({
        base: { policyVersion: 'v0', meanReward: rewardOf('v0') },
        latest: { policyVersion: v3, meanReward: rewardOf(v3) },
      });
      // No continue-as-new after the last iteration: the third execution finished the run.
      expect(await executionChain(client, runId, started.firstExecutionRunId)).toEqual(running);

      // What the first execution did once is not done again by the next ones: the base is
      // registered and replayed (by the run itself) once; each iteration trains once, from the last candidate.
      expect(stubs.of('registerBasePolicy')).toHaveLength(1);
      expect(
        stubs
          .of('runRollouts')
          .filter((c) => c.workflowId === runId)
          .map((c) => c.input.policyVersion),
      ).toEqual(['v0']);
      expect(stubs.of('updatePolicy').map((c) => [c.workflowId, c.input.parentVersion])).toEqual([
        [`${runId}-it1`, 'v0'],
        [`${runId}-it2`, v1],
        [`${runId}-it3`, v2],
      ]);
    });
  });
});
