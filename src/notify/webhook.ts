import { createHmac } from 'node:crypto';
import type { NotificationEvent, WebhookSettings } from './events.js';

/** A try the receiver did not accept (no answer, or not 2xx); the caller retries. */
export class WebhookDeliveryError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
  }
}

/** A setting that cannot work (a named environment variable unset): retrying will not help. */
export class WebhookSetupError extends Error {}

/**
 * POSTs one notification to the webhook once. The body is signed when a secret is set
 * (X-Rein-Signature: sha256=<hex HMAC of the exact bytes sent>, as GitHub signs its webhooks).
 * Returns the receiver's status; throws WebhookDeliveryError when it did not take it.
 */
export async function deliver(
  settings: WebhookSettings,
  event: NotificationEvent,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const body = JSON.stringify(event);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'rein-webhook',
    'x-rein-event': event.event,
    'x-rein-delivery': event.id,
  };
  for (const [name, variable] of Object.entries(settings.headersFromEnv)) {
    const value = env[variable];
    if (!value)
      throw new WebhookSetupError(
        `notifications.webhook.headersFromEnv.${name} names ${variable}, which is not set in the environment`,
      );
    headers[name.toLowerCase()] = value;
  }
  if (settings.secretEnv) {
    const secret = env[settings.secretEnv];
    if (!secret)
      throw new WebhookSetupError(
        `notifications.webhook.secretEnv names ${settings.secretEnv}, which is not set in the environment`,
      );
    headers['x-rein-signature'] = `sha256=${signature(secret, body)}`;
  }
  let res: Response;
  try {
    res = await fetch(settings.url, {
      method: 'POST',
      headers,
      body,
      signal: AbortSignal.timeout(settings.timeoutMs),
      redirect: 'error',
    });
  } catch (err) {
    const cause = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
    throw new WebhookDeliveryError(`webhook ${redacted(settings.url)} did not answer: ${cause}`, null);
  }
  // Read it whole so the connection is free again; a receiver's error text helps the log.
  const text = await res.text().catch(() => '');
  if (!res.ok)
    throw new WebhookDeliveryError(
      `webhook ${redacted(settings.url)} answered ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}`,
      res.status,
    );
  return res.status;
}

/** Hex HMAC-SHA256 of the body: what a receiver recomputes to check X-Rein-Signature. */
export function signature(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/** The URL for logs: a token in its query or credentials stays out. */
function redacted(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}
