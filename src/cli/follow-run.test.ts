import { PassThrough } from 'node:stream';
import type { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { RunNotFoundError, type RunReport } from '../client/runs.js';
import { followRun, formatRunSummary, StoppedFollowing, TemporalUnreachableError, type FollowOptions } from './follow-run.js';

// What the SDK throws when the server is down: its own message, the gRPC status in the cause.
const unreachable = () => new Error('cannot describe run r: Failed to describe workflow', { cause: Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14 }) });
const report = (execution: string): RunReport => ({ runId: 'r', execution, startTime: new Date(), closeTime: undefined, status: undefined, problem: undefined, activity: undefined, resumes: [] });
const client = {} as Client;

function follow(describeRun: () => Promise<RunReport>, options: Partial<FollowOptions> = {}) {
  const out = new PassThrough();
  const err = new PassThrough();
  let printed = '';
  out.on('data', (d: Buffer) => (printed += d.toString()));
  let notices = '';
  err.on('data', (d: Buffer) => (notices += d.toString()));
  const done = followRun(client, 'r', { out, err, address: 'temporal.test:7233', intervalMs: 5, retryDelayMs: { first: 5, longest: 20 }, describe: describeRun, ...options });
  return { done, notices: () => notices, printed: () => printed };
}

/** Resolves once `check` holds (polling), so tests wait for a state rather than a guessed time. */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 5));
}

describe('followRun while Temporal is unreachable', () => {
  it('says so once per try, keeps trying, and reports the run as it ends', async () => {
    const answers = [() => Promise.resolve(report('RUNNING')), () => Promise.reject(unreachable()), () => Promise.reject(unreachable()), () => Promise.resolve(report('RUNNING')), () => Promise.resolve(report('COMPLETED'))];
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
    const { done } = follow(() => (++calls === 1 ? Promise.resolve(report('RUNNING')) : new Promise<RunReport>(() => {})), { signal: interrupt.signal });
    await until(() => calls === 2);
    interrupt.abort('SIGTERM');
    const stopped = await done.catch((e: unknown) => e);
    expect(stopped).toBeInstanceOf(StoppedFollowing);
    expect((stopped as StoppedFollowing).lastReport).toMatchObject({ execution: 'RUNNING' });
  });

  it('stops at once when interrupted while waiting to retry', async () => {
    const interrupt = new AbortController();
    const { done, notices } = follow(() => Promise.reject(unreachable()), { signal: interrupt.signal, retryDelayMs: { first: 600_000, longest: 600_000 } });
    await until(() => notices().includes('attempt 1'));
    interrupt.abort('SIGINT');
    await expect(done).rejects.toBeInstanceOf(StoppedFollowing);
  });
});

describe('followRun while a stage is retried', () => {
  it('says once per failed attempt why it failed (a full disk never stays silent)', async () => {
    const full = 'only 12.0 MiB free under /data, below the floor of 1.0 GiB: free space there, or lower storage.minFreeMegabytes';
    const activity = (attempt: number, lastFailure?: string) => ({ workflowId: 'r-it1', stage: 'rollouts', type: 'runRollouts', attempt, done: undefined, total: undefined, lastFailure, waiting: undefined });
    const answers = [activity(1), activity(2, full), activity(2, full), activity(3, full), undefined];
    const { done, printed } = follow(() => {
      const next = answers.shift();
      return Promise.resolve(next ? { ...report('RUNNING'), activity: next } : report('COMPLETED'));
    });
    await done;
    expect(printed().split('\n').filter((l) => l.includes('failed'))).toEqual([
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
    const resume = { fromIteration: 2, policyVersion: 'r.v1', startOver: false, previousExecutionRunId: 'e1', previousStatus: 'TIMED_OUT', reason: 'trainer killed', progressFrom: 'query' as const, at: '2026-12-01T10:00:00.000Z' };
    expect(formatRunSummary({ ...report('RUNNING'), status, resumes: [resume, resume] })).toBe(
      'run r: running\ncontinued 2 times; last from iteration 2 with r.v1 after it timed out (trainer killed) at 2026-12-01T10:00:00.000Z\n',
    );
  });
});
