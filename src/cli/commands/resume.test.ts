import { describe, expect, it } from 'vitest';
import { completedRunMessage, type RunContinuation } from '../../client/runs.js';
import type { RunStatus } from '../../../workflows/index.js';
import { continuationLine } from './runs.js';

const continuation = (over: Partial<RunContinuation>): RunContinuation => ({
  runId: 'r',
  taskQueue: 'q',
  fromIteration: 3,
  policyVersion: 'r.v2',
  startOver: false,
  previousExecutionRunId: 'e1',
  previousStatus: 'FAILED',
  reason: 'batch refused: too few scored rollouts',
  progressFrom: 'query',
  at: '2026-12-01T00:00:00Z',
  endedInIteration: 3,
  executionRunId: 'e2',
  iterations: 5,
  resumes: 1,
  ...over,
});

describe('what `rein resume` says', () => {
  it('names how the run ended, where, why, and where it goes on', () => {
    expect(continuationLine(continuation({}))).toBe(
      'run r failed in iteration 3 (batch refused: too few scored rollouts); continuing from iteration 3 of 5 with policy r.v2.',
    );
    expect(
      continuationLine(
        continuation({
          previousStatus: 'TERMINATED',
          reason: 'node drained',
          endedInIteration: undefined,
          iterations: null,
        }),
      ),
    ).toBe('run r was terminated after iteration 2 (node drained); continuing from iteration 3 with policy r.v2.');
    expect(continuationLine(continuation({ previousStatus: 'TIMED_OUT', reason: 'timed out' }))).toBe(
      'run r timed out in iteration 3 (timed out); continuing from iteration 3 of 5 with policy r.v2.',
    );
    expect(
      continuationLine(
        continuation({
          startOver: true,
          fromIteration: 1,
          policyVersion: 'v0',
          endedInIteration: undefined,
          reason: 'registry unavailable',
        }),
      ),
    ).toBe(
      "run r failed before its first iteration (registry unavailable); starting it over from v0: the base's registration and held-out replay run again (finished rollouts are reused).",
    );
  });

  it('refuses a completed run, suggesting a new one', () => {
    const stopped = {
      runId: 'r',
      state: 'stopped',
      stage: 'done',
      nextIteration: 3,
      policyVersion: 'r.v2',
      iterations: [{ iteration: 1 }, { iteration: 2 }],
    } as RunStatus;
    expect(completedRunMessage('r', stopped)).toBe(
      'run r completed (stopped after 2 iterations): there is nothing to resume. To train on, start a new run: `rein train` starts from what production serves (run.startFrom: production, the default); ' +
        "to go on from this run's last policy, `rein promote r.v2` first (it needs a passing gate decision, or --override).",
    );
    expect(completedRunMessage('r', undefined)).toBe(
      'run r completed: there is nothing to resume. To train on, start a new run: `rein train` starts from what production serves (run.startFrom: production, the default).',
    );
  });
});
