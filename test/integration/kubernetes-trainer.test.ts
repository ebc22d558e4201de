import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BatchV1Api } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { reinConfigSchema } from '../../src/config/schema.js';
import { reinCommand } from '../../src/package-root.js';
import { PolicySetupError } from '../../src/training/errors.js';
import { kubernetesPolicyTrainer, kubernetesTrainerSchema, trainingJobName } from '../../src/training/kubernetes-trainer.js';
import { startKubeStandIn, type KubeStandIn } from '../helpers/kube-api-stand-in.js';
import { writeTinyPolicyAndBatch } from '../helpers/tiny-policy.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-kube-trainer-'));
const IMAGE = 'registry.example/rein-trainer:1';
const trainer = { ...reinConfigSchema.parse({}).trainer, learningRate: 0.01, epochs: 2, seed: 3 };
let base: string;
let batch: string;
let kube: KubeStandIn | undefined;

beforeAll(async () => {
  ({ base, batch } = await writeTinyPolicyAndBatch(dir));
});
afterEach(async () => {
  await kube?.close();
  kube = undefined;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A training Job template whose container runs `rein policy train` (the stand-in runs it as a local process). */
function template(name: string, container: Record<string, unknown> = {}, spec: Record<string, unknown> = {}): string {
  const rein = reinCommand();
  const job = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: 'replaced' },
    spec: {
      ...spec,
      template: {
        spec: {
          containers: [
            {
              name: 'trainer',
              image: '{{image}}',
              command: [rein.command],
              args: [...rein.args, 'policy', 'train', '--checkpoint', '{{parentCheckpoint}}', '--batch', '{{batchPath}}', '--out', '{{outputDir}}', '--lr', '{{learningRate}}', '--epochs', '{{epochs}}', '--seed', '{{seed}}', '--minibatch', '{{minibatchSize}}', '--clip', '{{clipEpsilon}}', '--max-grad-norm', '{{maxGradNorm}}'],
              ...container,
            },
          ],
        },
      },
    },
  };
  const file = path.join(dir, `${name}.yaml`);
  writeFileSync(file, JSON.stringify(job)); // JSON is YAML
  return file;
}

async function setup(templateFile: string, overrides: Record<string, unknown> = {}, standIn: Parameters<typeof startKubeStandIn>[0] = {}) {
  kube = await startKubeStandIn({ images: [IMAGE], ...standIn });
  const settings = kubernetesTrainerSchema.parse({ template: templateFile, image: IMAGE, ...overrides });
  const logDir = path.join(dir, 'logs');
  return { trainer: kubernetesPolicyTrainer(settings, trainer, logDir, { kubeConfig: kube.kubeConfig(), pollMs: 100 }), logDir, batchApi: kube.kubeConfig().makeApiClient(BatchV1Api) };
}

describe('the policy update as a Kubernetes Job (against the Jobs/Pods API stand-in)', () => {
  it('trains in a Job named after the output, keeps its log, and a retry follows that Job instead of training again', { timeout: 120_000 }, async () => {
    const { trainer: k8s, logDir, batchApi } = await setup(template('ok'));
    const outputDir = path.join(dir, 'policies', 'run-k', 'run-k.v1');
    const result = await k8s.train({ parentCheckpoint: base, batchPath: batch, outputDir });
    expect(result).toMatchObject({ steps: 2, reused: false, parent: base });
    expect(existsSync(path.join(outputDir, 'model.safetensors'))).toBe(true);
    expect(readFileSync(path.join(logDir, 'run-k.v1.train.log'), 'utf8')).toContain(result.batchContentHash);
    const jobs = (await batchApi.listNamespacedJob({ namespace: 'default' })).items;
    expect(jobs.map((j) => j.metadata?.name)).toEqual([trainingJobName(outputDir, 1)]);
    expect(jobs[0]?.spec).toMatchObject({ backoffLimit: 0, template: { spec: { restartPolicy: 'Never' } } });
    expect(jobs[0]?.metadata?.annotations?.['rein.dev/output-dir']).toBe(outputDir);

    const again = await k8s.train({ parentCheckpoint: base, batchPath: batch, outputDir });
    expect(again).toEqual(result);
    expect(kube?.jobsCreated()).toBe(1);
  });

  it('leaves the Job training when its worker hands the update back; the next try follows it', { timeout: 120_000 }, async () => {
    const { trainer: k8s, batchApi } = await setup(template('handback'));
    const outputDir = path.join(dir, 'policies', 'run-h', 'run-h.v1');
    const shutdown = new AbortController();
    const handedBack = k8s.train({ parentCheckpoint: base, batchPath: batch, outputDir, signal: shutdown.signal, handedBack: () => true }).catch((err: unknown) => err);
    while ((kube?.runningPods() ?? 0) === 0) await new Promise((r) => setTimeout(r, 50));
    shutdown.abort();
    expect(((await handedBack) as Error).message).toContain(`handed back (its worker is going away); Job ${trainingJobName(outputDir, 1)} runs on`);
    expect((await batchApi.listNamespacedJob({ namespace: 'default' })).items.map((j) => j.metadata?.name)).toEqual([trainingJobName(outputDir, 1)]);
    await expect(k8s.train({ parentCheckpoint: base, batchPath: batch, outputDir })).resolves.toMatchObject({ steps: 2, reused: false });
    expect(kube?.jobsCreated()).toBe(1);
  });

  it('reports a failed trainer with its exit code and log; the next attempt is a new Job', { timeout: 120_000 }, async () => {
    const { trainer: k8s } = await setup(template('fails'));
    const outputDir = path.join(dir, 'policies', 'run-f', 'run-f.v1');
    // A batch the trainer cannot read: its refusal (exit 2) is a setup error, not retried by the activity.
    const failure = await k8s.train({ parentCheckpoint: base, batchPath: path.join(dir, 'no-such-batch.safetensors'), outputDir }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(PolicySetupError);
    expect((failure as Error).message).toMatch(new RegExp(`training Job ${trainingJobName(outputDir, 1)} failed \\(exit 2.*cannot read the batch .*no-such-batch`, 's'));
    await expect(k8s.train({ parentCheckpoint: base, batchPath: batch, outputDir })).resolves.toMatchObject({ steps: 2 });
    expect(kube?.jobsCreated()).toBe(2);
  });

  it('refuses a template Kubernetes would retry on its own, before creating anything', async () => {
    const { trainer: k8s } = await setup(template('retries', {}, { backoffLimit: 3 }));
    const failure = await k8s.train({ parentCheckpoint: base, batchPath: batch, outputDir: path.join(dir, 'policies', 'x') }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(PolicySetupError);
    expect((failure as Error).message).toContain('sets backoffLimit 3; remove it');
    expect(kube?.jobsCreated()).toBe(0);
  });

  it('deletes the Job when the update is cancelled, and when its pod never starts', { timeout: 60_000 }, async () => {
    const { trainer: k8s, batchApi } = await setup(template('sleeps', { command: ['sleep'], args: ['60'] }), { pendingTimeoutSeconds: 2 });
    const controller = new AbortController();
    const cancelled = k8s.train({ parentCheckpoint: base, batchPath: batch, outputDir: path.join(dir, 'policies', 'c'), signal: controller.signal }).catch((err: unknown) => err);
    while ((kube?.runningPods() ?? 0) === 0) await new Promise((r) => setTimeout(r, 50));
    controller.abort();
    expect(((await cancelled) as Error).message).toContain('cancelled');
    await expect.poll(async () => (await batchApi.listNamespacedJob({ namespace: 'default' })).items.length).toBe(0);
    await kube?.close();

    const unpullable = await setup(template('unpullable', { image: 'registry.example/missing:1' }), { pendingTimeoutSeconds: 1 });
    const stuck = await unpullable.trainer.train({ parentCheckpoint: base, batchPath: batch, outputDir: path.join(dir, 'policies', 'p') }).catch((err: unknown) => err);
    expect((stuck as Error).message).toMatch(/did not start within 1 s \((ErrImagePull|ImagePullBackOff)\); deleted/);
    await expect.poll(async () => (await unpullable.batchApi.listNamespacedJob({ namespace: 'default' })).items.length).toBe(0);
  });
});
