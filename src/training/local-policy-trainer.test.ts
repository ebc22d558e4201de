import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { reinConfigSchema } from '../config/schema.js';
import { trainerCommand } from './local-policy-trainer.js';
import { trainerConfigOf, writeTrainerConfig } from './trainer-config.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-local-trainer-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const paths = { parentCheckpoint: '/p/v1', batchPath: '/b/batch.safetensors', outputDir: '/p/v2' };

describe('the local trainer command', () => {
  it('runs the PyTorch trainer with the paths and one config file, which holds every setting', () => {
    const trainer = reinConfigSchema.parse({
      trainer: { engine: 'pytorch', epochs: 2, pytorch: { python: process.execPath, lora: { rank: 4 } } },
    }).trainer;
    const configFile = writeTrainerConfig(path.join(dir, 'logs'), paths.outputDir, trainerConfigOf(trainer));
    const { command, args } = trainerCommand(trainer, { ...paths, configFile });
    expect(command).toBe(process.execPath);
    expect(args).toEqual([
      '-m',
      'rein_trainer',
      'train',
      '--checkpoint',
      '/p/v1',
      '--batch',
      '/b/batch.safetensors',
      '--out',
      '/p/v2',
      '--config',
      configFile,
    ]);
    expect(configFile).toBe(path.join(dir, 'logs', 'v2.trainer-config.json'));
    expect(JSON.parse(readFileSync(configFile, 'utf8'))).toMatchObject({
      epochs: 2,
      pytorch: { lora: { rank: 4, alpha: 32 } },
    });
  });

  it('gives the tfjs trainer its settings as flags', () => {
    const trainer = reinConfigSchema.parse({ trainer: { learningRate: 0.01, seed: 3 } }).trainer;
    const { args } = trainerCommand(trainer, { ...paths, configFile: 'unused' });
    const value = (flag: string) => args[args.indexOf(flag) + 1];
    expect(args).toContain('train');
    expect([
      value('--lr'),
      value('--seed'),
      value('--epochs'),
      value('--minibatch'),
      value('--clip'),
      value('--max-grad-norm'),
    ]).toEqual(['0.01', '3', '4', '32', '0.2', '1']);
    expect(args).not.toContain('--config');
  });
});
