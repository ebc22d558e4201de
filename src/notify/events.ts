import { z } from 'zod';
import { environmentName, httpUrl } from '../config/setting-types.js';

/** What Rein tells a webhook about: a candidate promoted, refused by the gate, production rolled back, a run failed. */
export const NOTIFICATION_EVENTS = ['promotion', 'refusal', 'rollback', 'run_failed'] as const;
export type NotificationEventName = (typeof NOTIFICATION_EVENTS)[number];

/** The JSON body a webhook receives (its fields beyond `event`, `id` and `at` are there where known). */
export interface NotificationEvent {
  event: NotificationEventName;
  /** The same on every retry of one delivery: a receiver drops a repeat by it. */
  id: string;
  /** When it happened (ISO 8601). */
  at: string;
  runId?: string | null;
  iteration?: number | null;
  /**
   * candidate: the version judged; incumbent: production's when it was judged; production: what
   * serves now; parent: the version a failed run was training from; from/to: a rollback's move.
   */
  versions: {
    candidate?: string;
    incumbent?: string;
    production?: string;
    parent?: string;
    from?: string | null;
    to?: string;
  };
  /** The gate's verdict (pass, fail, insufficient) and its reasons. */
  verdict?: string;
  reasons?: string[];
  decisionId?: string;
  /** Held-out success (accepted rate over scored pairs) of each side, when the gate had any. */
  heldout?: { incumbent: number; candidate: number };
  /** A failed run's root cause. */
  error?: string;
  actor?: string;
  links: Record<string, string>;
}

export const webhookSettingsSchema = z.strictObject({
  url: httpUrl.describe('Where each notification is POSTed as JSON'),
  events: z
    .array(z.enum(NOTIFICATION_EVENTS))
    .min(1)
    .default([...NOTIFICATION_EVENTS])
    .describe('Which events are sent: promotion, refusal (the gate said no), rollback, run_failed'),
  secretEnv: environmentName
    .optional()
    .describe(
      'Environment variable holding a secret: each body is signed with it, X-Rein-Signature: sha256=<HMAC-SHA256 of the body, hex>',
    ),
  headersFromEnv: z
    .record(z.string().regex(/^[A-Za-z0-9-]+$/, 'an HTTP header name'), environmentName)
    .default({})
    .describe('Extra headers, each read from an environment variable: {"Authorization": "MY_WEBHOOK_AUTH"}'),
  timeoutMs: z
    .number()
    .int()
    .min(100)
    .max(60_000)
    .default(10_000)
    .describe('Longest wait for the receiver to answer one try'),
});

export const notificationsSchema = z.strictObject({
  webhook: webhookSettingsSchema
    .optional()
    .describe(
      'A webhook called on promotion, refusal, rollback and failed runs; retried with backoff, never failing the run',
    ),
  temporalUiUrl: z
    .url()
    .optional()
    .describe(
      "The Temporal Web UI's address, for links to workflows in notifications (default: the embedded dev server's UI when Rein runs it)",
    ),
});

export type WebhookSettings = z.output<typeof webhookSettingsSchema>;
export type NotificationSettings = z.output<typeof notificationsSchema>;
