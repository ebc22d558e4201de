import { messageOf, statusOf } from '../../kubernetes/api.js';
import type { HarnessCluster } from './cluster.js';
import { renderJob, templateProblems } from './job-template.js';

const RBAC = 'RBAC: create, get, list, watch, delete on jobs; get, list, watch on pods and pods/log';

/**
 * What stops the executor before any rollout: a template that cannot be read or is wrong, no
 * usable cluster config or credentials, and what the API server says of the Job the template makes.
 */
export async function executorProblems(cluster: HarnessCluster): Promise<string[]> {
  const { settings, namespace } = cluster;
  let text: string;
  try {
    text = cluster.templateText();
  } catch (err) {
    return [
      `harness.kubernetes.template: ${settings.template} cannot be read (${(err as NodeJS.ErrnoException).code}); give the path of a Job manifest`,
    ];
  }
  const problems = templateProblems(text, settings);
  try {
    await cluster.apis().batch.listNamespacedJob({ namespace, limit: 1 });
  } catch (err) {
    const status = statusOf(err);
    if (status === 401 || status === 403) {
      problems.push(
        `harness.kubernetes: the API server refused to list Jobs in namespace ${namespace} (${status}); give the credentials access (${RBAC})`,
      );
    } else if (status === undefined && err instanceof Error && /kubeconfig|context|cluster/i.test(err.message)) {
      problems.push(`harness.kubernetes: no usable Kubernetes config: ${err.message}`);
    } else {
      throw err;
    }
  }
  if (problems.length === 0) problems.push(...(await serverProblems(cluster, text)));
  return problems;
}

/**
 * What the API server's validation and admission say of the Job this template makes, as a dry
 * run (nothing is created): a template Rein's own checks let through fails here, before any
 * rollout, in the API server's words.
 */
async function serverProblems(cluster: HarnessCluster, text: string): Promise<string[]> {
  const { settings, namespace } = cluster;
  const job = renderJob(text, settings, { rolloutId: 'check', attempt: 1, taskId: 'check', env: {} });
  try {
    await cluster.apis().batch.createNamespacedJob({ namespace, body: job, dryRun: 'All' });
    return [];
  } catch (err) {
    const status = statusOf(err);
    if (status === 400 || status === 422)
      return [
        `harness.kubernetes.template: the API server refuses the Job this template makes (${status}): ${messageOf(err)}`,
      ];
    if (status === 403)
      return [
        `harness.kubernetes: the API server refused to create Jobs in namespace ${namespace} (403); give the credentials access (${RBAC})`,
      ];
    // Busy, or a Job of that name exists: the real creates will say, each for its rollout.
    return [];
  }
}
