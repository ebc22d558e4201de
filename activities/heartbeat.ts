import { CancelledFailure, type Context } from '@temporalio/activity';

/**
 * Heartbeats on a timer (a third of the activity's heartbeat timeout, at most every 5 s), so a
 * live worker is never taken for dead while nothing finishes; `details` gives the latest
 * progress. Returns the function that stops it.
 */
export function keepHeartbeating(context: Context, details: () => unknown): () => void {
  const timeoutMs = context.info.heartbeatTimeoutMs ?? 60_000;
  const timer = setInterval(() => context.heartbeat(details()), Math.max(200, Math.min(5000, timeoutMs / 3)));
  return () => clearInterval(timer);
}

/**
 * Whether the activity's cancellation is the user's (its workflow cancelled it): only then is
 * its work ended for good. A worker shutting down, a heartbeat timeout, a pause or a reset also
 * abort the signal, and then the work is handed back to be resumed.
 */
export function isFinalCancel(context: Context): boolean {
  const reason: unknown = context.cancellationSignal.reason;
  return context.cancellationDetails?.cancelRequested === true || (reason instanceof CancelledFailure && reason.message === 'CANCELLED');
}
