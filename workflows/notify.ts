import { log, patched, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { NotificationEvent } from '../src/notify/events.js';

// Temporal's retries are the webhook's: 1 s doubling to 30 s, six tries (about a minute in all).
// A worker without the activity (an older one, a test's stubs) refuses at once instead.
const { notify } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 6, nonRetryableErrorTypes: ['WebhookSetupError', 'NotFoundError'] },
  summary: 'notify webhook',
});

/**
 * Tells the configured webhook (the worker's config says which, if any) about an event. Never
 * fails the workflow: a receiver that is still down after the retries costs the notification,
 * logged here and in each failed try's log. Behind a patch: histories from before it replay as they ran.
 */
export async function sendNotification(event: Omit<NotificationEvent, 'id' | 'at' | 'links'> & { links?: Record<string, string> }): Promise<void> {
  if (!patched('notify-webhook')) return;
  const id = `${workflowInfo().workflowId}.${event.event}`;
  try {
    await notify({ ...event, id, at: new Date().toISOString(), links: event.links ?? {} });
  } catch (err) {
    log.warn(`notification ${id} was not delivered: ${rootMessage(err)}`);
  }
}

function rootMessage(err: unknown): string {
  let e: unknown = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
