/**
 * A worker process for the Kubernetes rollout tests: runs one batch of rollouts with the Kubernetes
 * executor, as a worker does, so a test can kill it mid-Job (SIGKILL: no hand-back, no cleanup).
 * Usage: node --import tsx test/helpers/kube-rollout-worker.ts SPEC.json, where the spec holds
 * { gatewayUrl, adminKey, kubeconfig (its text), settings, batch, verifier }.
 */
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { GatewayControlClient } from '../../src/gateway/control-client.js';
import { kubernetesExecutor } from '../../src/rollouts/kubernetes/job-executor.js';
import { kubernetesHarnessSchema } from '../../src/rollouts/kubernetes/job-template.js';
import { runRollouts } from '../../src/rollouts/runner.js';

const specFile = process.argv[2];
if (!specFile)
  throw new Error(
    'kube-rollout-worker: give the path of a spec JSON file (gatewayUrl, adminKey, kubeconfig, settings, batch, verifier)',
  );
const spec = JSON.parse(readFileSync(specFile, 'utf8'));
const kubeConfig = new KubeConfig();
kubeConfig.loadFromString(spec.kubeconfig);
const harness = kubernetesExecutor(kubernetesHarnessSchema.parse(spec.settings), { kubeConfig });
const outcomes = await runRollouts(spec.batch, {
  gateway: new GatewayControlClient(spec.gatewayUrl, spec.adminKey),
  harness,
  verifier: spec.verifier,
});
await harness.close?.();
console.log(JSON.stringify(outcomes));
