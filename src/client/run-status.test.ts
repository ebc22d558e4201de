import type { WorkflowExecutionDescription } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { PROGRESS_MEMO } from '../../workflows/index.js';
import { recordedStatus, unansweredQuery } from './run-status.js';

/** What Temporal describes of a run's execution: its status, the progress memo it recorded, its stage attribute. */
const described = (status: string, stage: string) =>
  ({
    status: { name: status },
    memo: { [PROGRESS_MEMO]: { nextIteration: 2, policyVersion: 'r.v1', iterations: [] } },
    searchAttributes: { ReinStage: [stage] },
  }) as unknown as WorkflowExecutionDescription;

describe("a run's status from what Temporal keeps", () => {
  it('says how a run that ended without finishing ended, not what it was doing then', () => {
    expect(recordedStatus('r', described('CANCELLED', 'iteration-2'))).toMatchObject({
      state: 'cancelled',
      stage: 'iteration 2',
    });
    expect(recordedStatus('r', described('TERMINATED', 'iteration-1'))?.state).toBe('terminated');
    expect(recordedStatus('r', described('FAILED', 'iteration-1'))?.state).toBe('failed');
    expect(recordedStatus('r', described('TIMED_OUT', 'iteration-1'))?.state).toBe('timed_out');
  });

  it('keeps the recorded state of a run still open', () => {
    expect(recordedStatus('r', described('RUNNING', 'iteration-2'))?.state).toBe('running');
    expect(recordedStatus('r', described('RUNNING', 'paused'))?.state).toBe('paused');
    expect(recordedStatus('r', described('CONTINUED_AS_NEW', 'stopped'))?.state).toBe('stopped');
  });
});

describe('why a status query has no answer', () => {
  const noPoller = Object.assign(new Error('9 FAILED_PRECONDITION: no poller seen for task queue recently'), {
    code: 9,
  });
  it('says in words that no worker polls, and how to start one, whether Temporal or Rein found it', () => {
    const words =
      'no Rein worker is polling task queue "rein": start one with `rein worker` (or `rein dev`) and the run\'s config';
    expect(unansweredQuery('rein')).toBe(words);
    expect(unansweredQuery('rein', new Error('query failed', { cause: noPoller }))).toBe(words);
  });
  it("keeps any other failure's own words", () => {
    expect(unansweredQuery('rein', new Error('deadline exceeded'))).toBe(
      'the status query went unanswered: deadline exceeded',
    );
  });
});
