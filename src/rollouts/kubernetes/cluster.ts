import { readFileSync } from 'node:fs';
import { BatchV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../kubernetes/api.js';
import type { KubernetesHarnessSettings } from './job-template.js';

/** What the rollout executor's parts share: the settings, and the cluster's config and clients, made on first use. */
export interface HarnessCluster {
  settings: KubernetesHarnessSettings;
  namespace: string;
  /** Tries per API write before the run counts as an infrastructure failure. */
  apiTries: number;
  config(): KubeConfig;
  apis(): { batch: BatchV1Api; core: CoreV1Api };
  /** Read once: every Job of the batch comes from the template that was checked before launch. */
  templateText(): string;
}

export function harnessCluster(
  settings: KubernetesHarnessSettings,
  options: { kubeConfig?: KubeConfig | undefined; apiTries?: number | undefined },
): HarnessCluster {
  let kubeConfig = options.kubeConfig;
  let clients: { batch: BatchV1Api; core: CoreV1Api } | undefined;
  let template: string | undefined;
  const config = (): KubeConfig => (kubeConfig ??= loadKubeConfig(settings));
  return {
    settings,
    namespace: settings.namespace,
    apiTries: options.apiTries ?? 4,
    config,
    apis: () => (clients ??= { batch: config().makeApiClient(BatchV1Api), core: config().makeApiClient(CoreV1Api) }),
    templateText: () => (template ??= readFileSync(settings.template, 'utf8')),
  };
}
