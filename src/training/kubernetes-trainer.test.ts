import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { reinConfigSchema } from '../config/schema.js';
import { packageRoot } from '../package-root.js';
import { kubernetesTrainerSchema, renderTrainingJob } from './kubernetes-trainer.js';

const examples = path.join(packageRoot(), 'examples', 'calculator-agent', 'kubernetes');
const settings = kubernetesTrainerSchema.parse({ template: 'unused', image: 'registry.example/rein-trainer:1', namespace: 'rein-training' });
const job = { parentCheckpoint: '/srv/rein/data/policies/run/v1', batchPath: '/srv/rein/data/artifacts/batch.safetensors', outputDir: '/srv/rein/data/policies/run/v2' };

function render(file: string, trainer: Record<string, unknown>) {
  const parsed = reinConfigSchema.parse({ trainer }).trainer;
  const manifest = renderTrainingJob(readFileSync(path.join(examples, file), 'utf8'), settings, parsed, job, 1);
  return manifest.spec?.template.spec?.containers[0];
}

describe('the shipped training Job templates', () => {
  it('train-job-gpu.yaml runs the PyTorch trainer on a GPU with the LoRA settings and the adapter learning rate', () => {
    const container = render('train-job-gpu.yaml', { engine: 'pytorch', learningRate: 1e-5, pytorch: { lora: { rank: 32, alpha: 64, targetModules: ['q_proj', 'v_proj'], learningRate: 2e-4 }, maxTokensPerMicroBatch: 8192 } });
    expect(container?.command).toEqual(['python', '-m', 'rein_trainer']);
    const args = container?.args ?? [];
    const value = (flag: string) => args[args.indexOf(flag) + 1];
    expect(args[0]).toBe('train');
    expect([value('--checkpoint'), value('--batch'), value('--out')]).toEqual([job.parentCheckpoint, job.batchPath, job.outputDir]);
    expect([value('--lr'), value('--lora-rank'), value('--lora-alpha'), value('--lora-target-modules'), value('--max-tokens-per-micro-batch')]).toEqual(['0.0002', '32', '64', 'q_proj,v_proj', '8192']);
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
