import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { reinConfigSchema } from '../config/schema.js';
import { packageRoot } from '../package-root.js';
import { PolicySetupError } from './errors.js';
import { podStaging, renderTrainingJob } from './kubernetes-training-job.js';
import { kubernetesTrainerSchema } from './kubernetes-trainer-settings.js';
import { TRAINER_CONFIG_ENV, trainerConfigOf } from './trainer-config.js';

const examples = path.join(packageRoot(), 'examples', 'calculator-agent', 'kubernetes');
const settings = kubernetesTrainerSchema.parse({
  template: 'unused',
  image: 'registry.example/rein-trainer:1',
  namespace: 'rein-training',
});
const job = {
  parentCheckpoint: '/srv/rein/data/policies/run/v1',
  batchPath: '/srv/rein/data/artifacts/batch.safetensors',
  outputDir: '/srv/rein/data/policies/run/v2',
};

function render(file: string, trainer: Record<string, unknown>) {
  const parsed = reinConfigSchema.parse({ trainer }).trainer;
  const manifest = renderTrainingJob(readFileSync(path.join(examples, file), 'utf8'), settings, parsed, job, 1);
  return manifest.spec?.template.spec?.containers[0];
}

describe('the shipped training Job templates', () => {
  it('train-job-gpu.yaml runs the PyTorch trainer on a GPU with the LoRA settings and the adapter learning rate', () => {
    const container = render('train-job-gpu.yaml', {
      engine: 'pytorch',
      learningRate: 1e-5,
      pytorch: {
        lora: { rank: 32, alpha: 64, targetModules: ['q_proj', 'v_proj'], learningRate: 2e-4 },
        maxTokensPerMicroBatch: 8192,
      },
    });
    expect(container?.command).toEqual(['python', '-m', 'rein_trainer']);
    const args = container?.args ?? [];
    const value = (flag: string) => args[args.indexOf(flag) + 1];
    expect(args[0]).toBe('train');
    expect([value('--checkpoint'), value('--batch'), value('--out')]).toEqual([
      job.parentCheckpoint,
      job.batchPath,
      job.outputDir,
    ]);
    expect([
      value('--lr'),
      value('--lora-rank'),
      value('--lora-alpha'),
      value('--lora-target-modules'),
      value('--max-tokens-per-micro-batch'),
    ]).toEqual(['0.0002', '32', '64', 'q_proj,v_proj', '8192']);
    expect(container?.resources?.limits).toMatchObject({ 'nvidia.com/gpu': 1 });
    expect(container?.env).toContainEqual({ name: 'REIN_RESULT_FILE', value: '/dev/termination-log' });
  });

  it('train-job-gpu.yaml without LoRA is full fine-tuning (rank 0) at the trainer learning rate', () => {
    const args = render('train-job-gpu.yaml', { engine: 'pytorch', learningRate: 1e-5 })?.args ?? [];
    expect(args[args.indexOf('--lora-rank') + 1]).toBe('0');
    expect(args[args.indexOf('--lr') + 1]).toBe('0.00001');
  });

  it('train-job.yaml runs the tfjs trainer', () => {
    const container = render('train-job.yaml', {});
    expect(container?.command).toEqual(['rein']);
    expect(container?.args?.slice(0, 2)).toEqual(['policy', 'train']);
  });
});

describe('a training Job that stages its own artifacts (artifacts in S3, no shared disk)', () => {
  const artifacts = reinConfigSchema.parse({
    artifacts: { url: 's3://rein-bucket/prod', s3: { endpoint: 'http://s3.internal:9000', region: 'eu-west-1' } },
  }).artifacts;
  const remoteJob = {
    parentCheckpoint: 's3://rein-bucket/prod/policies/run/v1',
    batchPath: 's3://rein-bucket/prod/runs/run/iterations/2/batch.safetensors',
    outputDir: '/srv/a/policies/run/v2',
    outputUri: 's3://rein-bucket/prod/policies/run/v2',
  };

  it('pulls the batch and parent into an emptyDir, trains there as the last init container, and pushes the output as the one container', () => {
    const pytorch = reinConfigSchema.parse({ trainer: { engine: 'pytorch' } }).trainer;
    const withImage = { ...settings, artifactsImage: 'registry.example/rein:1', artifactsSecret: 's3-keys' };
    const spec = renderTrainingJob(
      readFileSync(path.join(examples, 'train-job-gpu.yaml'), 'utf8'),
      withImage,
      pytorch,
      remoteJob,
      1,
      podStaging(withImage, pytorch, artifacts),
    ).spec?.template.spec;
    expect(spec?.initContainers?.map((c) => c.name)).toEqual(['rein-pull-batch', 'rein-pull-parent', 'trainer']);
    expect(spec?.containers.map((c) => c.name)).toEqual(['rein-push-output']);
    const [pullBatch, pullParent, trainer] = spec?.initContainers ?? [];
    expect(pullBatch?.args).toEqual([
      'artifacts',
      'pull',
      remoteJob.batchPath,
      '/rein-staging/batch/batch.safetensors',
    ]);
    expect(pullParent?.args).toEqual(['artifacts', 'pull', remoteJob.parentCheckpoint, '/rein-staging/parent']);
    expect(spec?.containers[0]?.args).toEqual(['artifacts', 'push', '/rein-staging/out', remoteJob.outputUri]);
    expect(pullBatch).toMatchObject({
      image: 'registry.example/rein:1',
      envFrom: [{ secretRef: { name: 's3-keys' } }],
    });
    expect(pullBatch?.env).toEqual([
      { name: 'REIN_ARTIFACTS_URL', value: 's3://rein-bucket/prod' },
      { name: 'REIN_S3_ENDPOINT', value: 'http://s3.internal:9000' },
      { name: 'REIN_S3_REGION', value: 'eu-west-1' },
    ]);
    const args = trainer?.args ?? [];
    expect([
      args[args.indexOf('--checkpoint') + 1],
      args[args.indexOf('--batch') + 1],
      args[args.indexOf('--out') + 1],
    ]).toEqual(['/rein-staging/parent', '/rein-staging/batch/batch.safetensors', '/rein-staging/out']);
    expect(trainer?.volumeMounts).toContainEqual({ name: 'rein-staging', mountPath: '/rein-staging' });
    expect(spec?.volumes).toContainEqual({ name: 'rein-staging', emptyDir: {} });
  });

  it('leaves a parent that is a path in the image (a base model) where it is', () => {
    const tfjs = reinConfigSchema.parse({}).trainer;
    const spec = renderTrainingJob(
      readFileSync(path.join(examples, 'train-job.yaml'), 'utf8'),
      settings,
      tfjs,
      { ...remoteJob, parentCheckpoint: '/models/base' },
      1,
      podStaging(settings, tfjs, artifacts),
    ).spec?.template.spec;
    expect(spec?.initContainers?.map((c) => c.name)).toEqual(['rein-pull-batch', 'trainer']);
    // The tfjs trainer's image is Rein's: it stages too.
    expect(spec?.initContainers?.[0]?.image).toBe(settings.image);
    const args = spec?.initContainers?.[1]?.args ?? [];
    expect(args[args.indexOf('--checkpoint') + 1]).toBe('/models/base');
  });

  it("asks for Rein's image when the PyTorch trainer's cannot stage, and stages nothing without artifacts.url", () => {
    const pytorch = reinConfigSchema.parse({ trainer: { engine: 'pytorch' } }).trainer;
    expect(() => podStaging(settings, pytorch, artifacts)).toThrow(PolicySetupError);
    expect(() => podStaging(settings, pytorch, artifacts)).toThrow(/set trainer\.kubernetes\.artifactsImage/);
    expect(podStaging(settings, pytorch, reinConfigSchema.parse({}).artifacts)).toBeUndefined();
  });
});

describe('the trainer config in a training Job', () => {
  it("gives the trainer container the update's settings as the JSON the PyTorch trainer reads", () => {
    const trainer = reinConfigSchema.parse({
      trainer: { engine: 'pytorch', learningRate: 1e-5, pytorch: { lora: { rank: 32, alpha: 64 } } },
    }).trainer;
    const container = renderTrainingJob(
      readFileSync(path.join(examples, 'train-job-gpu.yaml'), 'utf8'),
      settings,
      trainer,
      job,
      1,
    ).spec?.template.spec?.containers[0];
    const passed = container?.env?.find((e) => e.name === TRAINER_CONFIG_ENV)?.value;
    expect(JSON.parse(passed ?? '{}')).toEqual(trainerConfigOf(trainer));
    expect(container?.env?.filter((e) => e.name === TRAINER_CONFIG_ENV)).toHaveLength(1);
  });
});
