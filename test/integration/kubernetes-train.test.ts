import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BatchV1Api, CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { reinConfigSchema } from '../../src/config/schema.js';
import { reinCommand } from '../../src/package-root.js';
import { withRegistry } from '../../src/registry/open.js';
import { jobNameFor } from '../../src/rollouts/kubernetes/job-template.js';
import { storeLocation } from '../../src/store/location.js';
import { traceStoreFromConfig } from '../../src/store/open.js';
import { kubernetesPolicyTrainer, trainingJobName } from '../../src/training/kubernetes-trainer.js';
import { kubernetesTrainerSchema } from '../../src/training/kubernetes-trainer-settings.js';
import { runRein } from '../helpers/cli.js';
import { exampleDir, writeExampleConfig } from '../helpers/example-config.js';
import { startKubeControlPlane, type KubeControlPlane } from '../helpers/kube-control-plane.js';
import { startNodeAgent, type NodeAgent } from '../helpers/node-agent/node-agent.js';

/**
 * `rein train` on the example agent with its Kubernetes settings: every harness run (training
 * rollouts and held-out replays) and every policy update is a Job from the example's templates
 * (kubernetes/job.yaml, kubernetes/train-job.yaml), created by the worker with a ServiceAccount
 * token bound to the example's rbac.yaml Role, on the real control plane; the node agent runs
 * their pods as local processes. This machine's disk stands in for the shared volume the trainer
 * template mounts at the data directory's path: the worker and the "pods" see the same files.
 */
const NAMESPACE = 'rein-rollouts';
const HARNESS_IMAGE = 'rein-calculator-agent:dev';
const TRAINER_IMAGE = 'rein-trainer:dev';
const kubeDir = path.join(exampleDir, 'kubernetes');

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-kubernetes-train-'));
const env = { TEMPORAL_ADDRESS: undefined, REIN_CONFIG: undefined, KUBECONFIG: undefined };
let plane: KubeControlPlane;
let agent: NodeAgent;

beforeAll(async () => {
  plane = await startKubeControlPlane();
  // The images, as the node agent runs them: the example's Dockerfile (ENTRYPOINT node /app/harness.mjs),
  // and a trainer image with `rein` on its PATH (train-job.yaml runs `rein policy train`).
  const bin = path.join(dir, 'trainer-image-bin');
  mkdirSync(bin);
  const rein = reinCommand();
  writeFileSync(
    path.join(bin, 'rein'),
    `#!/bin/sh\nexec ${[rein.command, ...rein.args].map((a) => `'${a}'`).join(' ')} "$@"\n`,
  );
  chmodSync(path.join(bin, 'rein'), 0o755);
  agent = await startNodeAgent(plane, {
    images: {
      [HARNESS_IMAGE]: { entrypoint: [process.execPath, path.join(exampleDir, 'harness.mjs')] },
      [TRAINER_IMAGE]: { env: { PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}` } },
    },
  });
  // What the README tells users to apply, as it is.
  await plane.createFromYaml(readFileSync(path.join(kubeDir, 'rbac.yaml'), 'utf8'));
});
afterAll(async () => {
  await agent?.close();
  await plane?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a trainer Job whose pod is never created', () => {
  it('says no pod was created and where to look, not just that it is pending', { timeout: 60_000 }, async () => {
    // The example's template in a namespace without its rein-trainer ServiceAccount: the Job
    // controller cannot create the pod (ServiceAccount admission), and says so only in its events.
    const settings = kubernetesTrainerSchema.parse({
      template: path.join(kubeDir, 'train-job.yaml'),
      image: TRAINER_IMAGE,
      namespace: 'default',
      pendingTimeoutSeconds: 2,
    });
    const trainer = kubernetesPolicyTrainer(
      settings,
      reinConfigSchema.parse({}).trainer,
      path.join(dir, 'no-pod-logs'),
      { kubeConfig: plane.kubeConfig(), pollMs: 100 },
    );
    const outputDir = path.join(dir, 'no-pod', 'v1');
    const failure = await trainer
      .train({ parentCheckpoint: path.join(dir, 'none'), batchPath: path.join(dir, 'none'), outputDir })
      .catch((err: unknown) => err);
    const name = trainingJobName(outputDir, 1);
    expect((failure as Error).message).toBe(
      `training Job ${name} did not start within 2 s (no pod was created: \`kubectl describe job ${name} -n default\` shows why, e.g. a serviceAccountName that does not exist or a ResourceQuota that does not allow it); deleted`,
    );
  });
});

describe('rein train with the harness and the trainer as Kubernetes Jobs (real control plane, node agent)', () => {
  it(
    'runs 2 gated iterations: each rollout a Job whose pod the node agent ran, each update a trainer Job, versions registered',
    { timeout: 600_000 },
    async () => {
      // The worker acts as the example's rein-worker ServiceAccount: the Role is all it has.
      const kubeconfig = path.join(dir, 'worker.kubeconfig');
      writeFileSync(kubeconfig, (await plane.kubeConfigForServiceAccount(NAMESPACE, 'rein-worker')).exportConfig());
      const cluster = { namespace: NAMESPACE, kubeconfig };
      const { file } = await writeExampleConfig(
        path.join(dir, 'run'),
        { iterations: 2, tasksPerIteration: 2, samplesPerTask: 2, heldoutLimit: 4 },
        {
          harness: {
            version: 'calculator-agent-1',
            kubernetes: {
              template: path.join(kubeDir, 'job.yaml'),
              image: HARNESS_IMAGE,
              timeoutSeconds: 120,
              pendingTimeoutSeconds: 120,
              ...cluster,
            },
          },
          trainer: {
            epochs: 1,
            kubernetes: {
              template: path.join(kubeDir, 'train-job.yaml'),
              image: TRAINER_IMAGE,
              timeoutSeconds: 300,
              pendingTimeoutSeconds: 120,
              ...cluster,
            },
          },
          // Two samples per task: keep groups whose rewards tie, so each iteration has something to train on.
          samples: { zeroVarianceGroups: 'keep' },
        },
      );
      const runId = 'kube-1';
      const train = await runRein(['--config', file, 'train', '--run-id', runId, '--follow'], { env });
      const log = `${train.stdout}\n${train.stderr.slice(-4000)}`;
      expect(train.code, log).toBe(0);
      // Both iterations trained a candidate and the gate decided on each, against production.
      expect(train.stdout, log).toMatch(/iteration 1: kube-1\.v1 .*; gate (pass|FAIL)/);
      expect(train.stdout, log).toMatch(/iteration 2: kube-1\.v2 .*; gate (pass|FAIL)/);
      const decisions = await runRein(['--config', file, 'decisions', '--run', runId], { env });
      expect(decisions.code, decisions.stderr).toBe(0);
      expect(decisions.stdout.split('\n').filter((l) => /kube-1\.v[12] /.test(l))).toHaveLength(2);

      // Read back where this config keeps its stores (SQLite files, or the suite's PostgreSQL).
      const { config } = loadConfig({ file, env: {} });
      const registered = await withRegistry(storeLocation(config), (registry) => registry.list({ runId }));
      expect(registered.map((r) => [r.version, r.parent, r.iteration])).toEqual([
        ['kube-1.v1', 'v0', 1],
        ['kube-1.v2', 'kube-1.v1', 2],
      ]);

      const batch = plane.kubeConfig().makeApiClient(BatchV1Api);
      const core = plane.kubeConfig().makeApiClient(CoreV1Api);
      const jobs = (await batch.listNamespacedJob({ namespace: NAMESPACE })).items;
      const pods = (await core.listNamespacedPod({ namespace: NAMESPACE })).items;
      const podsOf = (job: string) => pods.filter((p) => p.metadata?.labels?.['job-name'] === job);

      // Every rollout (training and held-out replay) ran once, as its own Job, on the node agent's node.
      const traces = await traceStoreFromConfig(config);
      let rollouts;
      try {
        rollouts = (await traces.listRollouts({ limit: 500 })).items;
      } finally {
        await traces.close();
      }
      const training = rollouts.filter((r) => r.mode === 'train');
      expect(training).toHaveLength(2 * 2 * 2);
      // Each iteration's tasks × samples, once each.
      expect(new Set(training.map((r) => r.id)).size).toBe(training.length);
      const harnessJobs = jobs.filter((j) => j.metadata?.labels?.['app.kubernetes.io/name'] === 'calculator-agent');
      expect(harnessJobs.map((j) => j.metadata?.annotations?.['rein.dev/rollout-id']).sort()).toEqual(
        rollouts.map((r) => r.id).sort(),
      );
      for (const rollout of rollouts) {
        expect(rollout.status, rollout.id).toBe('succeeded');
        const name = jobNameFor(rollout.id, 1);
        const job = harnessJobs.find((j) => j.metadata?.name === name);
        expect(job?.status?.conditions?.find((c) => c.type === 'Complete')?.status, name).toBe('True');
        const [pod, ...more] = podsOf(name);
        expect(more, name).toHaveLength(0);
        expect(pod?.spec?.nodeName).toBe(agent.nodeName);
        expect(pod?.spec?.serviceAccountName).toBe('rein-harness');
        expect(pod?.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
          exitCode: 0,
          reason: 'Completed',
        });
      }

      // Each policy update ran as a trainer Job named after its output, on the node agent, and left its log.
      const trainerJobs = jobs.filter((j) => j.metadata?.labels?.['app.kubernetes.io/name'] === 'rein-trainer');
      expect(trainerJobs).toHaveLength(2);
      for (const r of registered) {
        const job = trainerJobs.find(
          (j) => path.basename(j.metadata?.annotations?.['rein.dev/output-dir'] ?? '') === r.version,
        );
        const outputDir = job?.metadata?.annotations?.['rein.dev/output-dir'] as string;
        const name = trainingJobName(outputDir, 1);
        expect(job?.metadata?.name, r.version).toBe(name);
        expect(job?.status?.conditions?.find((c) => c.type === 'Complete')?.status, name).toBe('True');
        const [pod] = podsOf(name);
        expect(pod?.spec?.nodeName).toBe(agent.nodeName);
        expect(pod?.spec?.serviceAccountName).toBe('rein-trainer');
        expect(pod?.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
          exitCode: 0,
          reason: 'Completed',
        });
        expect(readFileSync(path.join(config.dataDir, 'logs', `${r.version}.train.log`), 'utf8')).toContain(
          r.batchContentHash as string,
        );
      }
    },
  );
});
