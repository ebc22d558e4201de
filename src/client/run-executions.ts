/** Temporal's execution statuses a run can be listed by: data only, so the console's pages bundle it too. */
export const RUN_EXECUTIONS = ['RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED', 'TIMED_OUT'] as const;
export type RunExecution = (typeof RUN_EXECUTIONS)[number];
