import { Context } from '@temporalio/activity';
import type { NotificationEvent, NotificationSettings } from '../src/notify/events.js';
import { deliver, WebhookSetupError } from '../src/notify/webhook.js';
import { WebhookDeliveryFailure, WebhookSetupFailure } from '../workflows/failures.js';

export interface NotifyActivityDeps {
  notifications?: NotificationSettings;
}

/** What a workflow asks to send; the activity adds the link to that workflow in the Temporal Web UI. */
export type NotifyInput = NotificationEvent;

export function createNotifyActivities(deps: NotifyActivityDeps) {
  return {
    /**
     * Sends one notification to the configured webhook, if it wants this event. A failed try is
     * logged and thrown as retryable: Temporal retries it with backoff (the workflow's policy).
     */
    async notify(input: NotifyInput): Promise<'sent' | 'not_configured'> {
      const webhook = deps.notifications?.webhook;
      if (!webhook || !webhook.events.includes(input.event)) return 'not_configured';
      const { info, log } = Context.current();
      const ui = deps.notifications?.temporalUiUrl?.replace(/\/+$/, '');
      const workflowId = info.workflowExecution?.workflowId;
      const namespace = info.workflowNamespace ?? info.activityNamespace;
      const event: NotificationEvent = {
        ...input,
        links: {
          ...(ui &&
            workflowId && {
              workflow: `${ui}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`,
            }),
          ...input.links,
        },
      };
      try {
        await deliver(webhook, event);
        return 'sent';
      } catch (err) {
        const message = (err as Error).message;
        if (err instanceof WebhookSetupError) throw new WebhookSetupFailure(message);
        log.warn(`webhook delivery of ${input.event} ${input.id} failed (try ${info.attempt}); Temporal retries it`, {
          error: message,
        });
        throw new WebhookDeliveryFailure(message);
      }
    },
  };
}
