import { PassThrough } from 'node:stream';
import type { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { RunNotFoundError, type RunReport } from '../client/runs.js';
import {
  followRun,
  formatRunSummary,
  StoppedFollowing,
  TemporalUnreachableError,
  type FollowOptions,
} from './follow-run.js';

// What the SDK throws when the server is down: its own message, the gRPC status in the cause.
const unreachable = () =>
  new Error('cannot describe run r: Failed to describe workflow', {
    cause: Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14 }),
  });
const report = (execution: string): RunReport => ({
  runId: 'r',
  execution,
  startTime: new Date(),
  closeTime: undefined,
  status: undefined,
  problem: undefined,
  activity: undefined,
  resumes: [],
});
const client = {} as Client;

function follow(describeRun: () => Promise<RunReport>, options: Partial<FollowOptions> = {}) {
  const out = new PassThrough();
  const err = new PassThrough();
  let printed = '';
  out.on('data', (d: Buffer) => (printed += d.toString()));
  let notices = '';
  err.on('data', (d: Buffer) => (notices += d.toString()));
  const done = followRun(client, 'r', {
    out,
    err,
    address: 'temporal.test:7233',
    intervalMs: 5,
    retryDelayMs: { first: 5, longest: 20 },
    describe: describeRun,
    ...options,
  });
  return { done, notices: () => notices, printed: () => printed };
}

/** Resolves once `check` holds (polling), so tests wait for a state rather than a guessed time. */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 5));
}

describe('followRun while Temporal is unreachable', () => {
  it('says so once per try, keeps trying, and reports the run as it ends', async () => {
    const answers = [
      () => Promise.resolve(report('RUNNING')),
      () => Promise.reject(unreachable()),
      () => Promise.reject(unreachable()),
      () => Promise.resolve(report('RUNNING')),
      () => Promise.resolve(report('COMPLETED')),
    ];
    const { done, notices } = follow(() => (answers.shift() as () => Promise<RunReport>)());
    await expect(done).resolves.toMatchObject({ execution: 'COMPLETED' });
    expect(notices().split('\n').filter(Boolean)).toEqual([
      'Temporal at temporal.test:7233 is unreachable; retrying (attempt 1)…',
      'Temporal at temporal.test:7233 is unreachable; retrying (attempt 2)…',
      'Temporal at temporal.test:7233 answers again; following run r.',
    ]);
  });

  it('gives up after reconnectForMs with an error that names the server, the run untouched', async () => {
    const { done } = follow(() => Promise.reject(unreachable()), { reconnectForMs: 50 });
    const failure = await done.catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(TemporalUnreachableError);
    expect((failure as Error).message).toMatch(/^Temporal at temporal\.test:7233 has not answered for \d+ s$/);
  });

  it('does not retry what the connection did not cause', async () => {
    const { done, notices } = follow(() => Promise.reject(new RunNotFoundError('no run named r')));
    await expect(done).rejects.toBeInstanceOf(RunNotFoundError);
    expect(notices()).toBe('');
  });

  it('stops at once when interrupted during a call that hangs, with the last report', async () => {
    const interrupt = new AbortController();
    let calls = 0;
    const { done } = follow(
      () => (++calls === 1 ? Promise.resolve(report('RUNNING')) : new Promise<RunReport>(() => {})),
      { signal: interrupt.signal },
    );
    await until(() => calls === 2);
    interrupt.abort('SIGTERM');
    const stopped = await done.catch((e: unknown) => e);
    expect(stopped).toBeInstanceOf(StoppedFollowing);
    expect((stopped as StoppedFollowing).lastReport).toMatchObject({ execution: 'RUNNING' });
  });

  it('stops at once when interrupted while waiting to retry', async () => {
    const interrupt = new AbortController();
    const { done, notices } = follow(() => Promise.reject(unreachable()), {
      signal: interrupt.signal,
      retryDelayMs: { first: 600_000, longest: 600_000 },
    });
    await until(() => notices().includes('attempt 1'));
    interrupt.abort('SIGINT');
    await expect(done).rejects.toBeInstanceOf(StoppedFollowing);
  });
});

describe('followRun while a stage is retried', () => {
  it('says once per failed attempt why it failed (a full disk never stays silent)', async () => {
    const full =
      'only 12.0 MiB free under /data, below the floor of 1.0 GiB: free space there, or lower storage.minFreeMegabytes';
    const activity = (attempt: number, lastFailure?: string) => ({
      workflowId: 'r-it1',
      stage: 'rollouts',
      type: 'runRollouts',
      attempt,
      done: undefined,
      total: undefined,
      lastFailure,
      waiting: undefined,
    });
    const answers = [activity(1), activity(2, full), activity(2, full), activity(3, full), undefined];
    const { done, printed } = follow(() => {
      const next = answers.shift();
      return Promise.resolve(next ? { ...report('RUNNING'), activity: next } : report('COMPLETED'));
    });
    await done;
    expect(
      printed()
        .split('\n')
        .filter((l) => l.includes('failed')),
    ).toEqual([
      `  attempt 1 of runRollouts failed: ${full}; retrying`,
      `  attempt 2 of runRollouts failed: ${full}; retrying`,
    ]);
  });
});

describe('formatRunSummary', () => {
  it('says a run failed (not the state it last reported) and how to continue it', () => {
    const status = { state: 'running', stage: 'iteration-1', iterations: [] } as unknown as RunReport['status'];
    const failed = { ...report('FAILED'), status, problem: 'Activity task failed: only 12.0 MiB free under /data' };
    expect(formatRunSummary(failed).split('\n').slice(0, 2)).toEqual([
      'run r: failed (Activity task failed: only 12.0 MiB free under /data)',
      '`rein resume r` continues it from its first unfinished iteration.',
    ]);
    expect(formatRunSummary({ ...report('TIMED_OUT'), status })).toMatch(/^run r: timed out\n/);
    expect(formatRunSummary({ ...report('RUNNING'), status })).toBe('run r: running\n');
    const resume = {
      fromIteration: 2,
      policyVersion: 'r.v1',
      startOver: false,
      previousExecutionRunId: 'e1',
      previousStatus: 'TIMED_OUT',
      reason: 'trainer killed',
      progressFrom: 'query' as const,
      at: '2026-12-01T10:00:00.000Z',
    };
    expect(formatRunSummary({ ...report('RUNNING'), status, resumes: [resume, resume] })).toBe(
      'run r: running\ncontinued 2 times; last from iteration 2 with r.v1 after it timed out (trainer killed) at 2026-12-01T10:00:00.000Z\n',
    );
  });
});

describe('followRun progress', () => {
  const rollouts = (done: number, stage = 'rollouts', type = 'runRollouts') => ({
    workflowId: 'r-it1',
    stage,
    type,
    attempt: 1,
    done,
    total: 8,
    lastFailure: undefined,
    waiting: undefined,
  });
  const running = (activity: RunReport['activity'], stage = 'iteration 1') => ({
    ...report('RUNNING'),
    status: {
      runId: 'r',
      state: 'running',
      stage,
      nextIteration: 1,
      policyVersion: 'v0',
      iterations: [],
    } as RunReport['status'],
    activity,
  });

  it('ends the progress bar at its total when the stage moves on (a poll rarely sees the last rollout)', async () => {
    const answers = [
      running(rollouts(3)),
      running(rollouts(5)),
      running({ ...rollouts(0, 'batch', 'buildBatch'), done: undefined, total: undefined }),
      report('COMPLETED'),
    ];
    const out = Object.assign(new PassThrough(), { isTTY: true });
    let printed = '';
    out.on('data', (d: Buffer) => (printed += d.toString()));
    const { done } = follow(() => Promise.resolve(answers.shift() as RunReport), { out });
    await done;
    expect(printed).toContain('8/8 rollouts');
  });

  it('off a terminal, says the stage reached its total too', async () => {
    const answers = [
      running(rollouts(3)),
      running({ ...rollouts(0, 'batch', 'buildBatch'), done: undefined, total: undefined }),
      report('COMPLETED'),
    ];
    const { done, printed } = follow(() => Promise.resolve(answers.shift() as RunReport));
    await done;
    expect(
      printed()
        .split('\n')
        .filter((l) => l.includes('rollouts') && l.includes('/')),
    ).toEqual(['  3/8 rollouts', '  8/8 rollouts']);
  });

  it('shows failed rollouts by class per stage as each iteration ends, and for the starting policy', async () => {
    const status = {
      runId: 'r',
      state: 'running',
      stage: 'iteration 2',
      nextIteration: 2,
      policyVersion: 'r.v1',
      iterations: [
        {
          iteration: 1,
          candidate: 'r.v1',
          meanReward: 0.5,
          heldoutMeanReward: 0.25,
          failures: { rollouts: { harness: 2 }, heldout: { harness: 1, infrastructure: 1 } },
        },
      ],
      heldout: {
        base: { policyVersion: 'v0', meanReward: 0.2, meanRewardByTask: {}, byFailureClass: { verifier: 3 } },
        latest: null,
      },
    } as RunReport['status'];
    const answers = [{ ...report('RUNNING'), status }, report('COMPLETED')];
    const { done, printed } = follow(() => Promise.resolve(answers.shift() as RunReport));
    await done;
    expect(printed()).toContain('held-out v0: mean reward 0.200; failed rollouts: verifier 3');
    expect(printed()).toContain(
      'iteration 1: r.v1  train mean reward 0.500, held-out 0.250; failed rollouts: training rollouts harness 2; held-out replay of the candidate harness 1, infrastructure 1',
    );
  });
});

describe('formatRunSummary of held-out results', () => {
  const heldout = (policyVersion: string, byTask: Record<string, number>) => ({
    policyVersion,
    meanReward: Object.values(byTask).reduce((a, b) => a + b, 0) / 4,
    meanRewardByTask: byTask,
  });
  const base = heldout('v0', { a: 1, b: 0, c: 0, d: 0 });
  const v2 = heldout('r.v2', { a: 1, b: 1, c: 1, d: 0 });
  const gate = (verdict: 'pass' | 'fail', promoted: boolean) => ({
    verdict,
    decisionId: 'd',
    incumbent: 'v0',
    promoted,
    reasons: [],
    acceptedRate: { incumbent: 0.25, candidate: 0.75 },
  });
  const statusWith = (
    iterations: NonNullable<RunReport['status']>['iterations'],
    held: NonNullable<RunReport['status']>['heldout'],
  ) =>
    ({
      runId: 'r',
      state: 'finished',
      stage: 'done',
      nextIteration: 3,
      policyVersion: 'r.v2',
      iterations,
      heldout: held,
    }) as RunReport['status'];

  it('reports as final what production serves, and the last candidate apart when it was not promoted', () => {
    const iterations = [
      {
        iteration: 1,
        candidate: 'r.v1',
        meanReward: 0.5,
        heldoutMeanReward: 0.25,
        gate: { ...gate('fail', false), acceptedRate: { incumbent: 0.25, candidate: 0.25 } },
      },
      {
        iteration: 2,
        candidate: 'r.v2',
        meanReward: 0.6,
        heldoutMeanReward: 0.75,
        gate: gate('fail', false),
        failures: { rollouts: { harness: 1 } },
      },
    ];
    const text = formatRunSummary({
      ...report('COMPLETED'),
      status: statusWith(iterations, { base, latest: v2, production: base }),
    });
    expect(text).toMatch(/^final +v0 +25\.0% +0\.250 +- +production$/m);
    expect(text).toMatch(/^last candidate +r\.v2 +75\.0% +0\.750 +- +not promoted \(gate fail\)$/m);
    expect(text).toMatch(/^2 +r\.v2 +0\.600 +0\.750 +fail +training rollouts harness 1$/m);
    // Production is the base: what is compared with the base is the last candidate, not the base itself.
    expect(text).toContain('last candidate r.v2 against the base v0: 2 tasks gained, 0 lost (paired by task)');
  });

  it('is one final row when the last candidate is what production serves', () => {
    const iterations = [
      { iteration: 2, candidate: 'r.v2', meanReward: 0.6, heldoutMeanReward: 0.75, gate: gate('pass', true) },
    ];
    const text = formatRunSummary({
      ...report('COMPLETED'),
      status: statusWith(iterations, { base, latest: v2, production: v2 }),
    });
    expect(text).toMatch(/^final +r\.v2 +75\.0% +0\.750 +- +production$/m);
    expect(text).not.toContain('last candidate');
    expect(text).toContain('production r.v2 against the base v0: 2 tasks gained, 0 lost (paired by task)');
  });
});
