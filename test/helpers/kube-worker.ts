import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { KubeControlPlane } from './kube-control-plane.js';

const rbacFile = path.resolve(import.meta.dirname, '../../examples/calculator-agent/kubernetes/rbac.yaml');
const EXAMPLE_NAMESPACE = 'rein-rollouts';

/**
 * A namespace set up as the README tells users to: the example's rbac.yaml applied as it is, only
 * its namespace renamed (so each test has its own), and a kubeconfig for its `rein-worker`
 * ServiceAccount with a token from the TokenRequest API (as `kubectl create token`). Rein's worker
 * uses that config, so whatever a test does through it, the example's Role is proven to allow.
 */
export async function workerNamespace(plane: KubeControlPlane, namespace: string): Promise<KubeConfig> {
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(namespace))
    throw new Error(`workerNamespace: ${namespace} is not a namespace name (a DNS-1123 label)`);
  await plane.createFromYaml(readFileSync(rbacFile, 'utf8').replaceAll(EXAMPLE_NAMESPACE, namespace));
  return plane.kubeConfigForServiceAccount(namespace, 'rein-worker');
}

/** The pods of a namespace, as the cluster admin sees them. */
export async function podsIn(plane: KubeControlPlane, namespace: string, labelSelector?: string) {
  return (
    await plane
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .listNamespacedPod({ namespace, ...(labelSelector && { labelSelector }) })
  ).items;
}

/**
 * The first value `read` gives that is not undefined or false, read again until it is (the test's timeout bounds it).
 */
export async function eventually<T>(read: () => Promise<T | undefined | false> | T | undefined | false): Promise<T> {
  for (;;) {
    const value = await read();
    if (value !== undefined && value !== false) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
