import proto from '@temporalio/proto';
import { msNumberToTs } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { stagesOf } from './iterations.js';

const T = proto.temporal.api.enums.v1.EventType;
const at = (seconds: number) => msNumberToTs(seconds * 1000);

describe('stage durations from an iteration workflow history', () => {
  it('adds up each stage from scheduled to closed (a retried set twice), counts the release child as heldout, and a running stage up to now', () => {
    const events = [
      {
        eventId: 5,
        eventType: T.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        eventTime: at(10),
        activityTaskScheduledEventAttributes: { activityType: { name: 'runRollouts' } },
      },
      {
        eventId: 7,
        eventType: T.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
        eventTime: at(14),
        activityTaskCompletedEventAttributes: { scheduledEventId: 5 },
      },
      {
        eventId: 9,
        eventType: T.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        eventTime: at(24),
        activityTaskScheduledEventAttributes: { activityType: { name: 'runRollouts' } },
      },
      {
        eventId: 11,
        eventType: T.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
        eventTime: at(26),
        activityTaskCompletedEventAttributes: { scheduledEventId: 9 },
      },
      {
        eventId: 13,
        eventType: T.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        eventTime: at(26),
        activityTaskScheduledEventAttributes: { activityType: { name: 'buildBatch' } },
      },
      {
        eventId: 15,
        eventType: T.EVENT_TYPE_ACTIVITY_TASK_FAILED,
        eventTime: at(27),
        activityTaskFailedEventAttributes: { scheduledEventId: 13 },
      },
      {
        eventId: 17,
        eventType: T.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        eventTime: at(30),
        startChildWorkflowExecutionInitiatedEventAttributes: { workflowType: { name: 'releaseCandidate' } },
      },
      {
        eventId: 18,
        eventType: T.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED,
        eventTime: at(30),
        childWorkflowExecutionStartedEventAttributes: {
          initiatedEventId: 17,
          workflowType: { name: 'releaseCandidate' },
          workflowExecution: { workflowId: 'r-it1-release', runId: 'e2' },
        },
      },
      {
        eventId: 20,
        eventType: T.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
        eventTime: at(38),
        childWorkflowExecutionCompletedEventAttributes: { initiatedEventId: 17 },
      },
      {
        eventId: 22,
        eventType: T.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        eventTime: at(40),
        activityTaskScheduledEventAttributes: { activityType: { name: 'recordLedgerEntry' } },
      },
    ] as unknown as proto.temporal.api.history.v1.IHistoryEvent[];
    expect(stagesOf(events, 41_500)).toEqual({
      stageSeconds: { rollouts: 6, batch: 1, heldout: 8, ledger: 1.5 },
      release: { workflowId: 'r-it1-release', executionRunId: 'e2' },
    });
  });
});
