import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { ClusterSettings } from './settings.js';

/** The kubeconfig file or context configured, else in-cluster config, $KUBECONFIG or ~/.kube/config. */
export function loadKubeConfig(settings: ClusterSettings): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (settings.kubeconfig) kubeConfig.loadFromFile(settings.kubeconfig);
  else kubeConfig.loadFromDefault();
  if (settings.context) kubeConfig.setCurrentContext(settings.context);
  return kubeConfig;
}

/** The HTTP status of a failed API call; undefined when no answer came (connection refused, reset). */
export function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/** The API server's own message (its Status object), else the error's first line. */
export function messageOf(err: unknown): string {
  const body = (err as { body?: unknown } | null)?.body;
  if (typeof body === 'string') {
    try {
      const status = JSON.parse(body) as { message?: string };
      if (status.message) return status.message;
    } catch {
      // not a Status object
    }
  }
  if (body && typeof body === 'object' && 'message' in body) return String((body as { message: unknown }).message);
  return err instanceof Error ? (err.message.split('\n')[0] ?? '') : String(err);
}

export function retryAfterMs(err: unknown): number | undefined {
  const header = (err as { headers?: Record<string, string> } | null)?.headers?.['retry-after'];
  const seconds = header === undefined ? NaN : Number(header);
  return Number.isFinite(seconds) ? Math.min(seconds, 30) * 1000 : undefined;
}

/** Whether an API server's answer is worth retrying: no answer, throttled, or a server error. */
export function isTransient(err: unknown): boolean {
  const status = statusOf(err);
  return status === undefined || status === 429 || status >= 500;
}

/** The newest of a Job's pods, by time: a watched pod's creationTimestamp is text, a listed one's a Date. */
export function newestPodOf(pods: readonly V1Pod[]): V1Pod | undefined {
  return [...pods].sort(
    (a, b) =>
      new Date(b.metadata?.creationTimestamp ?? 0).getTime() - new Date(a.metadata?.creationTimestamp ?? 0).getTime(),
  )[0];
}

/**
 * Why a Job that never started has no pod: only the Job controller's events say, and a worker's Role cannot read
 * events.
 */
export function noPodCreated(jobName: string, namespace: string): string {
  return `no pod was created: \`kubectl describe job ${jobName} -n ${namespace}\` shows why, e.g. a serviceAccountName that does not exist or a ResourceQuota that does not allow it`;
}
