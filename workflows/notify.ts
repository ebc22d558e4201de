import { log, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { NotificationEvent } from '../src/notify/events.js';
import { NOTIFY_ACTIVITY } from './activity-options.js';
import { rootMessage } from './failures.js';

const { notify } = proxyActivities<Activities>(NOTIFY_ACTIVITY);

/**
 * Tells the configured webhook (the worker's config says which, if any) about an event. Never
 * fails the workflow: a receiver that is still down after the retries costs the notification,
 * logged here and in each failed try's log.
 */
export async function sendNotification(
  event: Omit<NotificationEvent, 'id' | 'at' | 'links'> & { links?: Record<string, string> },
): Promise<void> {
  const id = `${workflowInfo().workflowId}.${event.event}`;
  try {
    await notify({ ...event, id, at: new Date().toISOString(), links: event.links ?? {} });
  } catch (err) {
    log.warn(`notification ${id} was not delivered: ${rootMessage(err)}`);
  }
}
