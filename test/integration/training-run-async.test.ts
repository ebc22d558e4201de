import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { describe, expect, it } from 'vitest';
import { iterationBatchId } from '../../src/rollouts/rollout-id.js';
import { statusQuery, stopSignal, trainingRun } from '../../workflows/index.js';
import {
  executionChain,
  executionStatus,
  heldoutTasks,
  rewardOf,
  runInput,
  stubActivities,
  waitFor,
  withStubWorker,
} from '../helpers/run-stubs.js';

/**
 * run.schedule async with stub activities on the shared dev server: which version each set
 * samples, which iteration trains on it, what overlaps, and what a stop or a continue-as-new does
 * to the rollouts running ahead.
 */
describe('the asynchronous schedule, with stub activities', () => {
  it("runs the next iteration's rollouts beside this one's update, from the newest trained version, and trains on them", async () => {
    const runId = `async-${randomUUID().slice(0, 8)}`;
    const [v1, v2, v3] = [1, 2, 3].map((n) => `${runId}.v${n}`) as [string, string, string];
    let releaseFirstUpdate!: () => void;
    const firstUpdateReleased = new Promise<void>((resolve) => (releaseFirstUpdate = resolve));
    const stubs = stubActivities({
      // Each update waits until the next iteration's rollouts have started: a synchronous
      // schedule would never get there (the activity would time out and the run fail).
      updatePolicy: async ({ iteration }) => {
        if (iteration === 3) return;
        const next = iterationBatchId(runId, iteration + 1);
        await waitFor(`iteration ${iteration + 1}'s rollouts start`, () =>
          stubs.of('runRollouts').some((c) => c.input.batchId === next),
        );
        if (iteration === 1) await firstUpdateReleased;
      },
    });
    await withStubWorker(stubs.activities, async ({ client, taskQueue }) => {
      const input = runInput(runId, {
        schedule: 'async',
        heldout: heldoutTasks,
        release: { samplesPerTask: 1, promote: false },
      });
      const started = await client.workflow.start(trainingRun, { taskQueue, workflowId: runId, args: [input] });

      // While iteration 1 updates, the status shows iteration 2's rollouts running from the base.
      await waitFor('iteration 1 updates', () => stubs.of('updatePolicy').length === 1);
      await waitFor('the set ahead starts', () => stubs.of('runRollouts').length >= 3);
      const status = await client.workflow.getHandle(runId).query(statusQuery);
      releaseFirstUpdate();
      expect(status).toMatchObject({
        stage: 'iteration 1',
        currentWorkflowId: `${runId}-it1`,
        rolloutsAhead: { iteration: 2, policyVersion: 'v0', workflowId: `${runId}-it2-rollouts` },
      });
      const result = await started.result();

      // Each set ran as its own workflow, pinned to the newest version trained when it started.
      const train = stubs.of('runRollouts').filter((c) => c.input.mode === 'train');
      expect(train.map((c) => [c.workflowId, c.input.policyVersion, c.input.taskIds, c.input.batchId])).toEqual([
        [`${runId}-it1-rollouts`, 'v0', ['t1', 't2'], iterationBatchId(runId, 1)],
        [`${runId}-it2-rollouts`, 'v0', ['t3', 't1'], iterationBatchId(runId, 2)],
        [`${runId}-it3-rollouts`, v1, ['t2', 't3'], iterationBatchId(runId, 3)],
      ]);
      // Each iteration trains the newest version on its set: one version behind from iteration 2 on.
      expect(stubs.of('updatePolicy').map((c) => [c.workflowId, c.input.parentVersion, c.input.newVersion])).toEqual([
        [`${runId}-it1`, 'v0', v1],
        [`${runId}-it2`, v1, v2],
        [`${runId}-it3`, v2, v3],
      ]);
      expect(
        stubs.of('buildBatch').map((c) => [c.input.policyVersion, 'selection' in c.input && c.input.selection.batchId]),
      ).toEqual([
        ['v0', iterationBatchId(runId, 1)],
        [v1, iterationBatchId(runId, 2)],
        [v2, iterationBatchId(runId, 3)],
      ]);
      expect(result.iterations.map((i) => [i.iteration, i.candidate, i.meanReward])).toEqual([
        [1, v1, rewardOf('v0')],
        [2, v2, rewardOf('v0')],
        [3, v3, rewardOf(v1)],
      ]);
      // Each iteration's result names the version its samples came from besides the one it trained.
      const sampledFrom = await Promise.all(
        [1, 2, 3].map(async (n) => (await client.workflow.getHandle(`${runId}-it${n}`).result()).sampledFrom),
      );
      expect(sampledFrom).toEqual(['v0', 'v0', v1]);
      // The gate is the same: every candidate replayed and judged against production.
      expect(stubs.of('gateCandidate').map((c) => c.input.candidate)).toEqual([v1, v2, v3]);
      expect(result.sampled).toBeUndefined();
    });
  });

  it('a stop cancels the rollouts running ahead; a continue-as-new carries the finished ones to the next iteration', async () => {
    const stopped = `async-stop-${randomUUID().slice(0, 8)}`;
    const continued = `async-can-${randomUUID().slice(0, 8)}`;
    const stubs = stubActivities({
      // The stopped run's second set runs until it is cancelled.
      runRollouts: async ({ batchId }) => {
        if (batchId !== iterationBatchId(stopped, 2)) return;
        for (;;) {
          Context.current().heartbeat();
          await Context.current().sleep(100);
        }
      },
    });
    await withStubWorker(stubs.activities, async ({ client, taskQueue }) => {
      const stop = await client.workflow.start(trainingRun, {
        taskQueue,
        workflowId: stopped,
        args: [runInput(stopped, { schedule: 'async', heartbeatTimeoutSeconds: 5 })],
      });
      await waitFor('the set ahead runs', () =>
        stubs.of('runRollouts').some((c) => c.input.batchId === iterationBatchId(stopped, 2)),
      );
      await stop.signal(stopSignal);
      const result = await stop.result();
      expect(result).toMatchObject({ state: 'stopped', policyVersion: `${stopped}.v1` });
      expect(result.iterations.map((i) => i.iteration)).toEqual([1]);
      expect(await executionStatus(client, `${stopped}-it2-rollouts`)).toBe('CANCELLED');

      const can = await client.workflow.start(trainingRun, {
        taskQueue,
        workflowId: continued,
        args: [runInput(continued, { schedule: 'async', continueAsNewEvery: 1 })],
      });
      const done = await can.result();
      expect(done.iterations.map((i) => [i.iteration, i.meanReward])).toEqual([
        [1, rewardOf('v0')],
        [2, rewardOf('v0')],
        [3, rewardOf(`${continued}.v1`)],
      ]);
      // Three executions, and each set ran once: the one run ahead crossed the continue-as-new.
      expect(await executionChain(client, continued, can.firstExecutionRunId)).toHaveLength(3);
      const sets = stubs
        .of('runRollouts')
        .filter((c) => c.input.batchId.startsWith(iterationBatchId(continued, 0).slice(0, -1)));
      expect(sets.map((c) => c.workflowId)).toEqual([1, 2, 3].map((n) => `${continued}-it${n}-rollouts`));
    });
  });
});
