import { z } from 'zod';

/** Kubernetes settings as config sections declare them: zod only, so loading a config loads no Kubernetes client. */
export const dnsLabel = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'a DNS-1123 label: lowercase letters, digits and -, at most 63');

/** The config fields that say how to reach the cluster, shared by every Kubernetes section. */
export const clusterSettingsShape = {
  kubeconfig: z
    .string()
    .optional()
    .describe('A kubeconfig file; in-cluster config or $KUBECONFIG / ~/.kube/config when unset'),
  context: z.string().optional().describe('The kubeconfig context to use'),
};

/** What Rein's Kubernetes settings say about reaching the cluster. */
export interface ClusterSettings {
  kubeconfig?: string | undefined;
  context?: string | undefined;
}
