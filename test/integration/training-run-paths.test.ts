import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { IterationFailure } from '../../workflows/failures.js';
import { statusQuery, trainingRun, type RunStatus } from '../../workflows/index.js';
import {
  executionChain,
  executionStatus,
  heldoutTasks,
  refused,
  rewardOf,
  runInput,
  stubActivities,
  waitFor,
  withStubWorker,
} from '../helpers/run-stubs.js';

/**
 * The paths of a training run that the end-to-end tests do not take (a failed iteration skipped
 * or retried, held-out replay every n-th iteration, continue-as-new): the real workflows on the
 * shared dev server, with stub activities that record each call and which workflow made it.
 */

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
        {
          iteration: 1,
          candidate: `${runId}.v1`,
          meanReward: rewardOf('v0'),
          heldoutMeanReward: null,
          samples: { sampledFrom: 'v0' },
        },
        {
          iteration: 2,
          candidate: null,
          meanReward: null,
          heldoutMeanReward: null,
          failed: 'trainer refused the batch of iteration 2',
        },
        {
          iteration: 3,
          candidate: `${runId}.v3`,
          meanReward: rewardOf(`${runId}.v1`),
          heldoutMeanReward: null,
          samples: { sampledFrom: `${runId}.v1` },
        },
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
