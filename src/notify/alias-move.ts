import type { AliasMove } from '../registry/promotion.js';
import type { NotificationEvent, NotificationSettings, WebhookSettings } from './events.js';
import { deliver, WebhookSetupError } from './webhook.js';

/** The schedule of the workflows' notify activity: 1 s doubling to 30 s, six tries. */
const TRIES = 6;
const FIRST_PAUSE_MS = 1000;
const LONGEST_PAUSE_MS = 30_000;

/**
 * Tells the webhook about a move of production made outside a workflow (`rein rollback`,
 * `rein promote`, the API): rollback, or promotion. Retried here with the workflows' backoff,
 * since no Temporal activity carries it; never throws: a failed delivery is only reported.
 */
export async function notifyAliasMove(
  settings: NotificationSettings,
  move: AliasMove,
  report: (problem: string) => void,
): Promise<void> {
  const { webhook } = settings;
  const { change } = move;
  const name = change.operation === 'rollback' ? 'rollback' : change.operation === 'promote' ? 'promotion' : undefined;
  if (!webhook || !name || !webhook.events.includes(name)) return;
  const event: NotificationEvent = {
    event: name,
    id: `alias-change.${change.alias}.${change.id}`,
    at: new Date(change.at).toISOString(),
    versions: {
      from: change.from,
      to: change.to,
      production: change.to,
      ...(name === 'promotion' && { candidate: change.to, ...(change.from && { incumbent: change.from }) }),
    },
    ...(change.reason && { reasons: [change.reason] }),
    ...(change.decisionId && { decisionId: change.decisionId }),
    actor: change.actor,
    links: {},
  };
  await deliverWithRetries(webhook, event, report);
}

async function deliverWithRetries(
  webhook: WebhookSettings,
  event: NotificationEvent,
  report: (problem: string) => void,
): Promise<void> {
  let pause = FIRST_PAUSE_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      await deliver(webhook, event);
      return;
    } catch (err) {
      const message = (err as Error).message;
      if (err instanceof WebhookSetupError || attempt === TRIES) {
        report(
          `the ${event.event} notification ${event.id} was not delivered${attempt > 1 ? ` after ${attempt} tries` : ''}: ${message}`,
        );
        return;
      }
      report(
        `the ${event.event} notification ${event.id} failed (try ${attempt} of ${TRIES}), trying again in ${pause / 1000} s: ${message}`,
      );
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, LONGEST_PAUSE_MS);
    }
  }
}
