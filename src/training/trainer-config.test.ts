import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { reinConfigSchema } from '../config/schema.js';
import { packageRoot } from '../package-root.js';
import { TRAINER_CONFIG_FORMAT, trainerConfigJsonSchema, trainerConfigOf } from './trainer-config.js';

/** The PyTorch trainer's copy of the schema; REIN_WRITE_TRAINER_SCHEMA=1 rewrites it from the zod schema. */
const committedSchema = path.join(packageRoot(), 'trainer', 'rein_trainer', 'trainer_config.schema.json');

describe('the trainer config', () => {
  it("is the config's trainer settings, less engine and placement", () => {
    const trainer = reinConfigSchema.parse({
      trainer: {
        engine: 'pytorch',
        learningRate: 1e-5,
        seed: 7,
        pytorch: { python: '/usr/bin/python3', lora: { rank: 8, learningRate: 2e-4 }, device: 'cuda' },
        kubernetes: { template: 't.yaml', image: 'i' },
      },
    }).trainer;
    expect(trainerConfigOf(trainer)).toEqual({
      format: TRAINER_CONFIG_FORMAT,
      seed: 7,
      learningRate: 1e-5,
      epochs: 4,
      minibatchSize: 32,
      clipEpsilon: 0.2,
      maxGradNorm: 1,
      pytorch: {
        device: 'cuda',
        dtype: 'auto',
        maxTokensPerMicroBatch: 16384,
        lora: {
          rank: 8,
          alpha: 32,
          dropout: 0,
          targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'],
          learningRate: 2e-4,
        },
      },
    });
    expect(trainerConfigOf(reinConfigSchema.parse({}).trainer).pytorch).not.toHaveProperty('lora');
  });

  it('has its JSON Schema committed in trainer/ as the zod schema generates it', () => {
    const generated = `${JSON.stringify(trainerConfigJsonSchema(), null, 2)}\n`;
    if (process.env.REIN_WRITE_TRAINER_SCHEMA === '1') writeFileSync(committedSchema, generated);
    // Stale: run `REIN_WRITE_TRAINER_SCHEMA=1 npx vitest run src/training/trainer-config.test.ts` and commit the file.
    expect(readFileSync(committedSchema, 'utf8')).toBe(generated);
  });
});
