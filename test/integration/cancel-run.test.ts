import { randomUUID } from 'node:crypto';
import { CancelledFailure, Context } from '@temporalio/activity';
import { describe, expect, it } from 'vitest';
import type { Activities } from '../../activities/index.js';
import { trainingRun, type TrainingRunInput } from '../../workflows/index.js';
import { withStubWorker } from '../helpers/run-stubs.js';

/** The real workflows, with training rollouts that go on until they are cancelled. */
describe('cancelling a training run', () => {
  it.each(['stop', 'retry'] as const)(
    'ends it CANCELLED, not failed, and tries no iteration again (onFailedIteration %s)',
    async (onFailedIteration) => {
      let rolloutSets = 0;
      const activities: Pick<Activities, 'registerBasePolicy' | 'runRollouts'> = {
        async registerBasePolicy() {},
        async runRollouts() {
          rolloutSets++;
          // Heartbeats carry the cancellation to the activity.
          for (;;) {
            Context.current().heartbeat({ done: 0, total: 4 });
            await Context.current().sleep(100);
          }
        },
      };
      await withStubWorker(activities, async ({ client, taskQueue }) => {
        const runId = `cancel-${randomUUID().slice(0, 8)}`;
        const input: TrainingRunInput = {
          runId,
          configHash: 'cfg',
          base: { version: 'v0', checkpointUri: 'file:///stub/v0' },
          startFrom: 'base',
          iterations: 3,
          train: {
            taskSet: { file: '/stub/train.jsonl', sha256: 'sha' },
            taskIds: ['t1', 't2'],
            tasksPerIteration: 2,
            samplesPerTask: 2,
          },
          onFailedIteration,
          maxIterationTries: 3,
          heartbeatTimeoutSeconds: 5,
        };
        const handle = await client.workflow.start(trainingRun, { taskQueue, workflowId: runId, args: [input] });
        while (rolloutSets === 0) await new Promise((r) => setTimeout(r, 20));
        await handle.cancel();
        const failure = await handle.result().catch((e: unknown) => e);
        expect((failure as Error).cause).toBeInstanceOf(CancelledFailure);
        expect((await handle.describe()).status.name).toBe('CANCELLED');
        expect(rolloutSets).toBe(1);
      });
    },
  );
});
