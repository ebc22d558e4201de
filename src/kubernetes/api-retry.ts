import { setTimeout as sleep } from 'node:timers/promises';
import type { BatchV1Api, V1Job } from '@kubernetes/client-node';
import { isTransient, retryAfterMs, statusOf } from './api.js';

/**
 * Calls the API server, riding out what a busy or restarting one answers (no answer, 429, 5xx):
 * up to `tries` calls, waiting as it asks (Retry-After) or backing off. Other errors, and the last
 * transient one, are thrown as they came.
 */
export async function withRetries<T>(call: () => Promise<T>, tries: number): Promise<T> {
  for (let tryNumber = 1; ; tryNumber++) {
    try {
      return await call();
    } catch (err) {
      if (!isTransient(err) || tryNumber >= tries) throw err;
      await sleep(retryAfterMs(err) ?? 250 * 2 ** tryNumber);
    }
  }
}

/**
 * Creates a Job, with retries; one of that name that exists already (made by an earlier try of the same work) counts as
 * created.
 */
export async function createJob(batch: BatchV1Api, namespace: string, body: V1Job, tries: number): Promise<void> {
  try {
    await withRetries(() => batch.createNamespacedJob({ namespace, body }), tries);
  } catch (err) {
    if (statusOf(err) !== 409) throw err;
  }
}
