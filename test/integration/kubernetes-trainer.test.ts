import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BatchV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { CoreV1Api } from '@kubernetes/client-node';
import { folderExists, putFolder } from '../../src/artifacts/folders.js';
import { S3ArtifactStore } from '../../src/artifacts/s3-store.js';
import { reinConfigSchema, type ReinConfig } from '../../src/config/schema.js';
import { stagedPolicyTrainer } from '../../src/training/staged-trainer.js';
import { startTestS3 } from '../helpers/s3.js';
import { reinCommand } from '../../src/package-root.js';
import { PolicySetupError } from '../../src/training/errors.js';
import { kubernetesPolicyTrainer, trainingJobName } from '../../src/training/kubernetes-trainer.js';
import { kubernetesTrainerSchema } from '../../src/training/kubernetes-trainer-settings.js';
import { startKubeControlPlane, type KubeControlPlane } from '../helpers/kube-control-plane.js';
import { eventually, podsIn, workerNamespace } from '../helpers/kube-worker.js';
import { startNodeAgent, type NodeAgent } from '../helpers/node-agent/node-agent.js';
import { setupPython, trainerEnv } from '../helpers/python.js';
import { writeTinyPolicyAndBatch } from '../helpers/tiny-policy.js';

/**
 * The policy update as a Kubernetes Job on the real control plane (the real Job controller and
 * garbage collector) with the node agent as the kubelet, from the example's own train-job.yaml and
 * train-job-gpu.yaml, the worker authenticating as the example's rbac.yaml ServiceAccount. The
 * node agent's image map stands in for the trainer images: the tfjs image has `rein` on its PATH
 * (this checkout's CLI), the GPU image the trainer's Python environment; this machine's disk is
 * the shared volume both sides see.
 */
const kubernetesDir = path.resolve(import.meta.dirname, '../../examples/calculator-agent/kubernetes');
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-kube-trainer-'));
const IMAGE = 'registry.example/rein-trainer:1';
const GPU_IMAGE = 'registry.example/rein-trainer-gpu:1';
const trainer = { ...reinConfigSchema.parse({}).trainer, learningRate: 0.01, epochs: 2, seed: 3 };
let base: string;
let batch: string;
let plane: KubeControlPlane;
let agent: NodeAgent;

/** A folder with a `rein` that runs this checkout's CLI: what the trainer image's PATH has. */
function reinOnPath(): string {
  const bin = path.join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  const rein = reinCommand();
  const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;
  writeFileSync(path.join(bin, 'rein'), `#!/bin/sh\nexec ${[rein.command, ...rein.args].map(quote).join(' ')} "$@"\n`);
  chmodSync(path.join(bin, 'rein'), 0o755);
  return bin;
}

beforeAll(async () => {
  ({ base, batch } = await writeTinyPolicyAndBatch(dir));
  plane = await startKubeControlPlane();
  const python = trainerEnv();
  agent = await startNodeAgent(plane, {
    images: {
      [IMAGE]: { env: { PATH: `${reinOnPath()}:${process.env.PATH ?? ''}` } },
      [GPU_IMAGE]: { env: { ...python, PATH: `${path.dirname(setupPython())}:${python.PATH}` } },
    },
    // What a GPU node reports; train-job-gpu.yaml asks for one.
    capacity: { 'nvidia.com/gpu': '1' },
  });
}, 120_000);
afterAll(async () => {
  await agent?.close();
  await plane?.close();
  rmSync(dir, { recursive: true, force: true });
});

let namespaces = 0;
/** A namespace of its own with the example's RBAC; the trainer works in it as the worker's ServiceAccount. */
async function setup(
  template: string,
  overrides: Record<string, unknown> = {},
  trainerSettings = trainer,
  artifacts?: ReinConfig['artifacts'],
) {
  const namespace = `training-${++namespaces}`;
  const worker = await workerNamespace(plane, namespace);
  const settings = kubernetesTrainerSchema.parse({ template, image: IMAGE, namespace, ...overrides });
  const logDir = path.join(dir, 'logs');
  const batchApi = worker.makeApiClient(BatchV1Api);
  return {
    trainer: kubernetesPolicyTrainer(settings, trainerSettings, logDir, {
      kubeConfig: worker,
      pollMs: 100,
      ...(artifacts && { artifacts }),
    }),
    logDir,
    namespace,
    jobs: async () => (await batchApi.listNamespacedJob({ namespace })).items,
  };
}
const trainJob = path.join(kubernetesDir, 'train-job.yaml');
/** The example's train-job.yaml, edited. */
function edited(name: string, edit: (yaml: string) => string): string {
  const file = path.join(dir, `${name}.yaml`);
  writeFileSync(file, edit(readFileSync(trainJob, 'utf8')));
  return file;
}

describe('the policy update as a Kubernetes Job on the real control plane', () => {
  it(
    "trains in a Job from the example's train-job.yaml named after the output, keeps its log, and a retry follows that Job instead of training again",
    { timeout: 120_000 },
    async () => {
      const { trainer: k8s, logDir, jobs } = await setup(trainJob);
      const outputDir = path.join(dir, 'policies', 'run-k', 'run-k.v1');
      const result = await k8s.train({ parentCheckpoint: base, batchPath: batch, outputDir });
      expect(result).toMatchObject({ steps: 2, reused: false, parent: base });
      expect(existsSync(path.join(outputDir, 'model.safetensors'))).toBe(true);
      expect(readFileSync(path.join(logDir, 'run-k.v1.train.log'), 'utf8')).toContain(result.batchContentHash);
      const created = await jobs();
      expect(created.map((j) => j.metadata?.name)).toEqual([trainingJobName(outputDir, 1)]);
      expect(created[0]?.spec).toMatchObject({
        backoffLimit: 0,
        template: { spec: { restartPolicy: 'Never', serviceAccountName: 'rein-trainer' } },
      });
      expect(created[0]?.metadata?.annotations?.['rein.dev/output-dir']).toBe(outputDir);
      expect(created[0]?.status?.conditions?.find((c) => c.type === 'Complete')?.status).toBe('True');

      const again = await k8s.train({ parentCheckpoint: base, batchPath: batch, outputDir });
      expect(again).toEqual(result);
      expect((await jobs()).length).toBe(1);
    },
  );

  it(
    'leaves the Job training when its worker hands the update back; the next try follows it',
    { timeout: 120_000 },
    async () => {
      const { trainer: k8s, namespace, jobs } = await setup(trainJob);
      const outputDir = path.join(dir, 'policies', 'run-h', 'run-h.v1');
      const shutdown = new AbortController();
      const handedBack = k8s
        .train({ parentCheckpoint: base, batchPath: batch, outputDir, signal: shutdown.signal, handedBack: () => true })
        .catch((err: unknown) => err);
      await eventually(async () => (await podsIn(plane, namespace)).some((p) => p.status?.phase === 'Running'));
      shutdown.abort();
      expect(((await handedBack) as Error).message).toContain(
        `handed back (its worker is going away); Job ${trainingJobName(outputDir, 1)} runs on`,
      );
      expect((await jobs()).map((j) => j.metadata?.name)).toEqual([trainingJobName(outputDir, 1)]);
      await expect(k8s.train({ parentCheckpoint: base, batchPath: batch, outputDir })).resolves.toMatchObject({
        steps: 2,
        reused: false,
      });
      expect((await jobs()).length).toBe(1);
    },
  );

  it(
    'reports a failed trainer with its exit code and log; the next attempt is a new Job',
    { timeout: 120_000 },
    async () => {
      const { trainer: k8s, jobs } = await setup(trainJob);
      const outputDir = path.join(dir, 'policies', 'run-f', 'run-f.v1');
      // A batch the trainer cannot read: its refusal (exit 2) is a setup error, not retried by the activity.
      const failure = await k8s
        .train({ parentCheckpoint: base, batchPath: path.join(dir, 'no-such-batch.safetensors'), outputDir })
        .catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(PolicySetupError);
      expect((failure as Error).message).toMatch(
        new RegExp(
          `training Job ${trainingJobName(outputDir, 1)} failed \\(exit 2.*cannot read the batch .*no-such-batch`,
          's',
        ),
      );
      await expect(k8s.train({ parentCheckpoint: base, batchPath: batch, outputDir })).resolves.toMatchObject({
        steps: 2,
      });
      expect((await jobs()).length).toBe(2);
    },
  );

  it(
    "runs the example's train-job-gpu.yaml on a GPU node: the PyTorch trainer gets Rein's arguments, and its refusal comes back",
    { timeout: 120_000 },
    async () => {
      const pytorch = reinConfigSchema.parse({
        trainer: { engine: 'pytorch', pytorch: { device: 'cpu', lora: { rank: 4, alpha: 8 } } },
      }).trainer;
      const {
        trainer: k8s,
        namespace,
        jobs,
      } = await setup(path.join(kubernetesDir, 'train-job-gpu.yaml'), { image: GPU_IMAGE }, pytorch);
      const outputDir = path.join(dir, 'policies', 'run-g', 'run-g.v1');
      // A batch the trainer cannot read: it answers before loading any model.
      const failure = await k8s
        .train({ parentCheckpoint: base, batchPath: path.join(dir, 'no-such-batch.safetensors'), outputDir })
        .catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(PolicySetupError);
      expect((failure as Error).message).toMatch(
        /failed \(exit 2.*rein-trainer: cannot read the batch .*no-such-batch/s,
      );
      const [job] = await jobs();
      expect(job?.spec?.template.spec?.containers[0]?.resources?.limits).toMatchObject({ 'nvidia.com/gpu': '1' });
      const [pod] = await podsIn(plane, namespace);
      expect(pod?.spec?.nodeName).toBe(agent.nodeName);
    },
  );

  it(
    'with artifacts in S3 and no shared disk, the pod pulls the batch and parent, trains, and pushes the output; a worker on another host finds it',
    { timeout: 180_000 },
    async () => {
      const s3 = await startTestS3();
      const store = new S3ArtifactStore(`s3://${await s3.bucket()}/rein`, { endpoint: s3.endpoint });
      try {
        const artifacts = reinConfigSchema.parse({
          artifacts: { url: store.url, s3: { endpoint: s3.endpoint } },
        }).artifacts;
        // No volume: the example's shared-disk mount is what S3 replaces.
        const template = edited('s3', (y) =>
          y.replace(/\n\s+volumeMounts:\n.*\n/, '\n').replace(/\n\s+volumes:\n(\s+.*\n?)+$/, '\n'),
        );
        const {
          trainer: k8s,
          namespace,
          jobs,
        } = await setup(template, { artifactsSecret: 's3-credentials' }, trainer, artifacts);
        const admin = plane.kubeConfig().makeApiClient(CoreV1Api);
        await admin.createNamespacedSecret({
          namespace,
          body: { metadata: { name: 's3-credentials' }, stringData: s3.env },
        });
        const batchUri = (await store.put('runs/run-s/iterations/1/batch.safetensors', await readFile(batch))).uri;
        const parentUri = await putFolder(store, 'policies/base', base);
        const onWorker = (host: string) => ({
          stagingDir: path.join(dir, host, 'staging'),
          policiesDir: path.join(dir, host, 'policies'),
        });

        const first = onWorker('host-a');
        const result = await stagedPolicyTrainer(k8s, { artifacts: store, ...first }).train({
          parentCheckpoint: parentUri,
          batchPath: batchUri,
          outputDir: path.join(first.policiesDir, 'run-s', 'run-s.v1'),
        });
        expect(result).toMatchObject({
          steps: 2,
          reused: false,
          checkpointUri: `${store.url}/policies/run-s/run-s.v1`,
        });
        expect(await folderExists(store, result.checkpointUri as string)).toBe(true);
        // Nothing was staged or written on the worker's disk.
        expect(existsSync(first.stagingDir) || existsSync(first.policiesDir)).toBe(false);
        const [job] = await jobs();
        expect(job?.metadata?.annotations?.['rein.dev/output-dir']).toBe(result.checkpointUri);
        const [pod] = await podsIn(plane, namespace);
        expect(pod?.status?.initContainerStatuses?.map((c) => [c.name, c.state?.terminated?.exitCode])).toEqual([
          ['rein-pull-batch', 0],
          ['rein-pull-parent', 0],
          ['trainer', 0],
        ]);
        expect(pod?.status?.containerStatuses?.map((c) => [c.name, c.state?.terminated?.exitCode])).toEqual([
          ['rein-push-output', 0],
        ]);

        // Another worker host (its own disk) retrying the update finds the pushed output: nothing trains again.
        const second = onWorker('host-b');
        const retried = await stagedPolicyTrainer(k8s, { artifacts: store, ...second }).train({
          parentCheckpoint: parentUri,
          batchPath: batchUri,
          outputDir: path.join(second.policiesDir, 'run-s', 'run-s.v1'),
        });
        expect(retried).toMatchObject({
          reused: true,
          checkpointUri: result.checkpointUri,
          batchContentHash: result.batchContentHash,
        });
        expect(await jobs()).toHaveLength(1);

        // A batch that is not in the bucket: the pull refuses (not retried), naming its container and the URI.
        const missing = `${store.url}/runs/run-s/iterations/2/batch.safetensors`;
        const failure = await stagedPolicyTrainer(k8s, { artifacts: store, ...first })
          .train({
            parentCheckpoint: result.checkpointUri as string,
            batchPath: missing,
            outputDir: path.join(first.policiesDir, 'run-s', 'run-s.v2'),
          })
          .catch((err: unknown) => err);
        expect(failure).toBeInstanceOf(PolicySetupError);
        expect((failure as Error).message).toMatch(
          new RegExp(
            `failed in container rein-pull-batch \\(exit 2.*${missing.replaceAll('/', '\\/')} does not exist`,
            's',
          ),
        );
      } finally {
        store.close();
        await s3.close();
      }
    },
  );

  it("refuses a template before creating anything: Rein's message for a Job Kubernetes would retry, the apiserver's verbatim for an invalid one", async () => {
    const retries = await setup(
      edited('retries', (y) => y.replace('spec:\n  template:', 'spec:\n  backoffLimit: 3\n  template:')),
    );
    const failure = await retries.trainer
      .train({ parentCheckpoint: base, batchPath: batch, outputDir: path.join(dir, 'policies', 'x') })
      .catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(PolicySetupError);
    expect((failure as Error).message).toContain('sets backoffLimit 3; remove it');
    expect(await retries.jobs()).toEqual([]);

    const invalid = await setup(edited('bad-name', (y) => y.replace('- name: trainer', '- name: Trainer_1')));
    const refused = await invalid.trainer
      .train({ parentCheckpoint: base, batchPath: batch, outputDir: path.join(dir, 'policies', 'y') })
      .catch((err: unknown) => err);
    // Not retried: the same template is refused again.
    expect(refused).toBeInstanceOf(PolicySetupError);
    expect((refused as Error).message).toMatch(
      /\(422\): Job\.batch "rein-train-[0-9a-f]+-1" is invalid: spec\.template\.spec\.containers\[0\]\.name: Invalid value: "Trainer_1": a lowercase RFC 1123 label/,
    );
    expect(await invalid.jobs()).toEqual([]);
  });

  it(
    'deletes the Job and its pod when the update is cancelled, and when its pod never starts',
    { timeout: 60_000 },
    async () => {
      const sleeps = await setup(
        edited('sleeps', (y) =>
          y.replace('command: [rein]', 'command: [sleep]').replace(/args:\n(\s+- .*\n)+/, 'args: ["60"]\n'),
        ),
        { pendingTimeoutSeconds: 20 },
      );
      const controller = new AbortController();
      const cancelled = sleeps.trainer
        .train({
          parentCheckpoint: base,
          batchPath: batch,
          outputDir: path.join(dir, 'policies', 'c'),
          signal: controller.signal,
        })
        .catch((err: unknown) => err);
      await eventually(async () => (await podsIn(plane, sleeps.namespace)).some((p) => p.status?.phase === 'Running'));
      controller.abort();
      expect(((await cancelled) as Error).message).toContain('cancelled');
      await eventually(
        async () => (await sleeps.jobs()).length === 0 && (await podsIn(plane, sleeps.namespace)).length === 0,
      );

      const unpullable = await setup(trainJob, { image: 'registry.example/missing:1', pendingTimeoutSeconds: 1 });
      const stuck = await unpullable.trainer
        .train({ parentCheckpoint: base, batchPath: batch, outputDir: path.join(dir, 'policies', 'p') })
        .catch((err: unknown) => err);
      expect((stuck as Error).message).toMatch(/did not start within 1 s \(ErrImagePull\); deleted/);
      await eventually(
        async () => (await unpullable.jobs()).length === 0 && (await podsIn(plane, unpullable.namespace)).length === 0,
      );
    },
  );
});
