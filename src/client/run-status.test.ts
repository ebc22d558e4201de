import type { WorkflowExecutionDescription } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { PROGRESS_MEMO } from '../../workflows/index.js';
import { recordedStatus } from './run-status.js';

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
