import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { RunRolloutsInput, RunRolloutsSummary } from '../../activities/run-rollouts.js';
import type { UpdatePolicySummary } from '../../activities/update-policy.js';
import {
  completedRunMessage,
  continueRun,
  describeRun,
  RunNotResumableError,
  type RunResume,
} from '../../src/client/runs.js';
import { recordedProgress } from '../../src/client/run-status.js';
import { createLogger } from '../../src/log/logger.js';
import type { BatchStageResult } from '../../src/samples/stage.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { PolicyUpdateFailure } from '../../workflows/failures.js';
import { statusQuery, type RunStatus, type TrainingRunInput } from '../../workflows/index.js';
import { runRein } from '../helpers/cli.js';
import { recordHistory, recordingHistories } from '../helpers/histories.js';
import { testClient } from '../helpers/temporal.js';

// Orchestration is under test, not learning: the real workflows with stub activities that count
// their calls, fail or wait when told.
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-continue-run-'));
const env = { TEMPORAL_ADDRESS: undefined, REIN_CONFIG: undefined };
const taskQueue = `continue-run-${randomUUID()}`;
const calls: string[] = [];
/** Keys (`<run>.it<n>`) whose next updates fail for good (how many), as a trainer killed on every retry would. */
const updateFails = new Map<string, number>();
/** Batch ids whose next rollouts wait until released. */
const rolloutsWait = new Map<string, Promise<void>>();

const activities = {
  async registerBasePolicy(base: { version: string }) {
    calls.push(`registerBasePolicy ${base.version}`);
  },
  async runRollouts(input: RunRolloutsInput): Promise<RunRolloutsSummary> {
    calls.push(`runRollouts ${input.batchId}`);
    const waiting = rolloutsWait.get(input.batchId);
    rolloutsWait.delete(input.batchId);
    await waiting;
    const n = input.taskIds.length * input.samplesPerTask;
    return {
      batchId: input.batchId,
      harnessVersion: 'stub',
      total: n,
      byStatus: { succeeded: n },
      byFailureClass: {},
      meanReward: 0.5,
      unscored: 0,
      rewardDisagreements: 0,
      meanRewardByTask: Object.fromEntries(input.taskIds.map((t) => [t, 0.5])),
    };
  },
  async buildBatch(input: { runId: string; iteration: number }): Promise<BatchStageResult> {
    calls.push(`buildBatch ${input.runId}.it${input.iteration}`);
    const uri = path.join(dir, `${input.runId}.it${input.iteration}.batch`);
    return {
      batch: { uri, sha256: 'h', contentHash: 'h', bytes: 1 },
      report: { uri: `${uri}.report`, sha256: 'r', bytes: 1 },
      summary: {
        rolloutsUsed: 1,
        rolloutsExcluded: 0,
        sequences: 1,
        trainedTokens: 1,
        meanReward: 0.5,
        mergeRate: 1,
        driftRate: 0,
      },
    };
  },
  async updatePolicy(input: {
    runId: string;
    iteration: number;
    parentVersion: string;
    newVersion: string;
  }): Promise<UpdatePolicySummary> {
    const key = `${input.runId}.it${input.iteration}`;
    calls.push(`updatePolicy ${key} from ${input.parentVersion}`);
    const fails = updateFails.get(key) ?? 0;
    if (fails > 0) updateFails.set(key, fails - 1);
    if (fails > 0) throw new PolicyUpdateFailure('trainer killed (exit 137) on its last try');
    return {
      version: input.newVersion,
      parent: input.parentVersion,
      checkpointUri: path.join(dir, input.newVersion),
      steps: 1,
      approxKl: 0,
      clipFraction: 0,
      reused: false,
      seconds: 0,
    };
  },
  async recordLedgerEntry() {},
};

let worker: Worker;
let running: Promise<void>;
let nativeConnection: NativeConnection;
let client: Client;
let closeClient: () => Promise<void>;
let configFile: string;

const createWorker = (queue: string) =>
  Worker.create({
    connection: nativeConnection,
    taskQueue: queue,
    workflowBundle: { code: inject('workflowBundleCode') },
    activities,
  });

beforeAll(async () => {
  installTemporalRuntime(createLogger('error'));
  nativeConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
  worker = await createWorker(taskQueue);
  running = worker.run();
  const test = await testClient();
  client = test.client;
  closeClient = () => test.connection.close();
  configFile = path.join(dir, 'rein.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      dataDir: path.join(dir, 'state'),
      log: { level: 'warn' },
      temporal: { address: inject('temporalAddress'), taskQueue },
    }),
  );
});
afterAll(async () => {
  worker?.shutdown();
  await running;
  await closeClient?.();
  await nativeConnection?.close();
  rmSync(dir, { recursive: true, force: true });
});

function runInput(runId: string, iterations: number): TrainingRunInput {
  return {
    runId,
    configHash: 'test',
    base: { version: 'v0', checkpointUri: dir },
    startFrom: 'base',
    iterations,
    train: {
      taskSet: { file: path.join(dir, 'tasks.jsonl'), sha256: 'none' },
      taskIds: ['t1', 't2', 't3'],
      tasksPerIteration: 1,
      samplesPerTask: 2,
    },
    onFailedIteration: 'stop',
  };
}

const count = (call: string) => calls.filter((c) => c === call).length;

/** Waits for a state (polling), not for a guessed time. */
async function until(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The progress part of a status, as the run records it in its memo. */
function progressOf(status: RunStatus) {
  const { runId: _r, state: _s, stage: _t, currentWorkflowId: _c, ...progress } = status;
  return progress;
}

describe('continuing a run that did not complete', () => {
  it(
    '`rein resume` continues a run whose iteration 2 failed for good from iteration 2, without running iteration 1 again; refuses a completed run',
    { timeout: 180_000 },
    async () => {
      const runId = `cont-${randomUUID().slice(0, 8)}`;
      const input = runInput(runId, 3);
      updateFails.set(`${runId}.it2`, 1);
      const first = await client.workflow.start('trainingRun', {
        taskQueue,
        workflowId: runId,
        args: [input],
        memo: { configHash: 'test' },
      });
      await expect(first.result()).rejects.toThrow(/workflow execution failed/i);
      expect((await first.describe()).status.name).toBe('FAILED');

      // The run's own account of a failed execution, and the same as it recorded it where Temporal keeps it without a
      // worker.
      const queried = await first.query(statusQuery);
      expect(queried.iterations.map((i) => [i.iteration, i.candidate, i.failed])).toEqual([
        [1, `${runId}.v1`, undefined],
        [2, null, 'trainer killed (exit 137) on its last try'],
      ]);
      expect(recordedProgress(await first.describe())).toEqual(progressOf(queried));

      const resumed = await runRein(['--config', configFile, 'resume', runId, '--follow'], { env });
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(resumed.stdout).toContain(
        `run ${runId} failed in iteration 2 (trainer killed (exit 137) on its last try); continuing from iteration 2 of 3 with policy ${runId}.v1.`,
      );
      expect(resumed.stdout).toContain(`run ${runId}: finished`);
      expect(resumed.stdout).toMatch(
        new RegExp(
          `continued once; last from iteration 2 with ${runId}\\.v1 after it failed \\(trainer killed \\(exit 137\\) on its last try\\)`,
        ),
      );

      // Iteration 1 ran once; iteration 2 ran again from the policy iteration 1 made; base registration once.
      expect(count('registerBasePolicy v0')).toBe(1);
      expect(count(`runRollouts ${runId}.it1`)).toBe(1);
      expect(count(`updatePolicy ${runId}.it1 from v0`)).toBe(1);
      expect(count(`updatePolicy ${runId}.it2 from ${runId}.v1`)).toBe(2);
      expect(count(`updatePolicy ${runId}.it3 from ${runId}.v2`)).toBe(1);

      const handle = client.workflow.getHandle(runId);
      const final = (await handle.result()) as RunStatus;
      expect(final.state).toBe('finished');
      // The continued execution (started with its progress) replays, and is kept for replay.test.ts when recording.
      const continuedHistory = await handle.fetchHistory();
      await Worker.runReplayHistory({ workflowBundle: { code: inject('workflowBundleCode') } }, continuedHistory);
      if (recordingHistories) recordHistory(continuedHistory, 'training-run-continued.json');
      expect(final.iterations.map((i) => [i.iteration, i.candidate, i.failed])).toEqual([
        [1, `${runId}.v1`, undefined],
        [2, `${runId}.v2`, undefined],
        [3, `${runId}.v3`, undefined],
      ]);
      const described = await handle.describe();
      expect(described.runId).not.toBe(first.firstExecutionRunId);
      expect(described.memo?.configHash).toBe('test');
      const resumes = described.memo?.resumes as RunResume[];
      expect(resumes).toHaveLength(1);
      expect(resumes[0]).toMatchObject({
        fromIteration: 2,
        policyVersion: `${runId}.v1`,
        startOver: false,
        previousStatus: 'FAILED',
        previousExecutionRunId: first.firstExecutionRunId,
        progressFrom: 'query',
      });

      // A completed run has nothing to resume, and its id is not started again.
      const again = await runRein(['--config', configFile, 'resume', runId], { env });
      expect(again.code).toBe(1);
      expect(again.stderr).toBe(`rein: ${completedRunMessage(runId, final)}\n`);
      expect(again.stderr).toContain('there is nothing to resume');
      expect((await handle.describe()).runId).toBe(described.runId);
    },
  );

  it(
    'continues a run terminated in the middle of an iteration; refuses one still running',
    { timeout: 120_000 },
    async () => {
      const runId = `term-${randomUUID().slice(0, 8)}`;
      const input = runInput(runId, 2);
      let release = () => {};
      rolloutsWait.set(`${runId}.it2`, new Promise<void>((resolve) => (release = resolve)));
      const first = await client.workflow.start('trainingRun', { taskQueue, workflowId: runId, args: [input] });
      try {
        await until('iteration 2 runs its rollouts', () => count(`runRollouts ${runId}.it2`) === 1);
        const stillRunning = await continueRun(client, runId).then(
          () => undefined,
          (err: unknown) => err,
        );
        expect(stillRunning).toBeInstanceOf(RunNotResumableError);
        expect((stillRunning as Error).message).toBe(
          `run ${runId} is still running: there is nothing to continue. A paused run goes on with \`rein resume ${runId}\` (the resume signal); \`rein status ${runId}\` shows where it is.`,
        );

        await first.terminate('operator: node drained');
        const terminated = await first.describe();
        expect(recordedProgress(terminated)).toEqual(progressOf(await first.query(statusQuery)));
        // The iteration it was in is still listed as its child: continueRun ends it before iteration 2 runs again.
        expect(terminated.raw.pendingChildren?.map((c) => c.workflowId)).toEqual([`${runId}-it2`]);
        const continued = await continueRun(client, runId);
        expect(continued).toMatchObject({
          fromIteration: 2,
          policyVersion: `${runId}.v1`,
          endedInIteration: 2,
          previousStatus: 'TERMINATED',
          reason: 'operator: node drained',
          progressFrom: 'query',
          resumes: 1,
          taskQueue,
        });
      } finally {
        release(); // the terminated iteration's activity ends; its result goes nowhere
      }
      const final = (await client.workflow.getHandle(runId).result()) as RunStatus;
      expect(final.iterations.map((i) => [i.iteration, i.candidate])).toEqual([
        [1, `${runId}.v1`],
        [2, `${runId}.v2`],
      ]);
      expect(count(`runRollouts ${runId}.it1`)).toBe(1);
      expect(count(`runRollouts ${runId}.it2`)).toBe(2);
      expect(count(`updatePolicy ${runId}.it2 from ${runId}.v1`)).toBe(1);
    },
  );

  it(
    'shows the status and continues from the progress the run recorded when no worker answers; a retried iteration starts again under its first id',
    { timeout: 120_000 },
    async () => {
      const runId = `hist-${randomUUID().slice(0, 8)}`;
      const queue = `continue-run-history-${randomUUID()}`;
      const input: TrainingRunInput = { ...runInput(runId, 2), onFailedIteration: 'retry', maxIterationTries: 2 };
      updateFails.set(`${runId}.it2`, 2);
      const own = await createWorker(queue);
      const first = await own.runUntil(async () => {
        const handle = await client.workflow.start('trainingRun', {
          taskQueue: queue,
          workflowId: runId,
          args: [input],
        });
        await expect(handle.result()).rejects.toThrow(/workflow execution failed/i);
        return handle;
      });
      // Its worker is gone: `rein status` shows what the run recorded, and why it ended.
      const status = await runRein(['--config', configFile, 'status', runId], { env });
      expect(status.code).toBe(1);
      expect(status.stdout).toContain(
        `run ${runId}: failed (Workflow execution failed: iteration 2 of run ${runId} failed 2 times: trainer killed (exit 137) on its last try)`,
      );
      expect(status.stdout).toMatch(new RegExp(`\\n1 +${runId}\\.v1 `));
      expect(status.stdout).toContain('failed: trainer killed (exit 137) on its last try');
      expect(status.stdout).toContain(`\`rein resume ${runId}\` continues it from its first unfinished iteration.`);

      const continued = await continueRun(client, runId);
      expect(continued).toMatchObject({
        fromIteration: 2,
        policyVersion: `${runId}.v1`,
        endedInIteration: 2,
        previousStatus: 'FAILED',
        progressFrom: 'query',
        taskQueue: queue,
      });
      // The same reason as with a worker: the failed iteration's root cause, as the run recorded it.
      expect(continued.reason).toBe('trainer killed (exit 137) on its last try');
      // Running again with no worker to answer its query: its status is the progress it starts from.
      const waiting = await describeRun(client, runId);
      expect(waiting).toMatchObject({
        execution: 'RUNNING',
        status: {
          nextIteration: 2,
          policyVersion: `${runId}.v1`,
          iterations: [{ iteration: 1, candidate: `${runId}.v1` }],
        },
      });
      expect(waiting.problem).toMatch(
        /^(no Rein worker is polling task queue .*: start one with `rein worker`|the status query went unanswered).*; showing the progress the run last recorded$/,
      );
      expect(waiting.problem).not.toContain('FAILED_PRECONDITION');
      const final = (await (
        await createWorker(queue)
      ).runUntil(client.workflow.getHandle(runId).result())) as RunStatus;
      expect(final.iterations.map((i) => [i.iteration, i.candidate, i.failed])).toEqual([
        [1, `${runId}.v1`, undefined],
        [2, `${runId}.v2`, undefined],
      ]);
      expect(first.firstExecutionRunId).not.toBe((await client.workflow.getHandle(runId).describe()).runId);
      expect(count(`runRollouts ${runId}.it1`)).toBe(1);
      expect(count(`updatePolicy ${runId}.it2 from ${runId}.v1`)).toBe(3);
    },
  );
});
