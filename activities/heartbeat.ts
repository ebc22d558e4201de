import { CancelledFailure, Context } from '@temporalio/activity';

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
 * Runs `work` while the activity it runs in heartbeats (keepHeartbeating), so that a dead
 * worker's stage moves to another worker after the heartbeat timeout rather than its whole
 * start-to-close timeout. Outside an activity (a unit test calling the function) it only runs it.
 */
export async function whileHeartbeating<T>(
  work: () => Promise<T>,
  details: () => unknown = () => undefined,
): Promise<T> {
  let context: Context;
  try {
    context = Context.current();
  } catch {
    return work();
  }
  const stop = keepHeartbeating(context, details);
  try {
    return await work();
  } finally {
    stop();
  }
}

/**
 * For work that awaits only promises that are already settled (synchronous SQLite behind an async
 * API, tokenizing): such a loop never lets a timer run, the heartbeat's included. Awaited at each
 * step, the function returned yields to the event loop once `everyMs` have passed since it last did.
 */
export function eventLoopTurns(everyMs = 100): () => Promise<void> {
  let last = Date.now();
  return async () => {
    if (Date.now() - last < everyMs) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    last = Date.now();
  };
}

/**
 * Whether the activity's cancellation is the user's (its workflow cancelled it): only then is
 * its work ended for good. A worker shutting down, a heartbeat timeout, a pause or a reset also
 * abort the signal, and then the work is handed back to be resumed.
 */
export function isFinalCancel(context: Context): boolean {
  const reason: unknown = context.cancellationSignal.reason;
  return (
    context.cancellationDetails?.cancelRequested === true ||
    (reason instanceof CancelledFailure && reason.message === 'CANCELLED')
  );
}
