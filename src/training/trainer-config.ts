import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { reinConfigSchema, type TrainerSettings } from '../config/schema.js';

/**
 * The settings of one policy update, as the trainer reads them: one JSON file (or, in a
 * Kubernetes Job, the same JSON in an environment variable) instead of a flag per setting. Its
 * schema is the config's own `trainer` section, less what only Rein uses (the engine, where the
 * update runs, which backend serves it, which Python runs it), so a setting is declared once, in
 * src/config/schema.ts. The PyTorch trainer validates the file against the JSON Schema generated
 * from it (trainer/rein_trainer/trainer_config.schema.json; trainer-config.test.ts fails when
 * that copy is stale).
 */
export const TRAINER_CONFIG_FORMAT = 'rein-trainer-config/1';
/**
 * The variable that carries the config's JSON text into a trainer container, where no file of the worker's is at hand.
 */
export const TRAINER_CONFIG_ENV = 'REIN_TRAINER_CONFIG_JSON';

const trainerSection = reinConfigSchema.shape.trainer.unwrap();

export const trainerConfigSchema = trainerSection
  .pick({ learningRate: true, epochs: true, minibatchSize: true, clipEpsilon: true, maxGradNorm: true, seed: true })
  .extend({
    format: z.literal(TRAINER_CONFIG_FORMAT).describe('The version of this file'),
    pytorch: trainerSection.shape.pytorch
      .unwrap()
      .omit({ python: true })
      .prefault({})
      .describe('Settings of the PyTorch trainer'),
  })
  .describe(
    "One policy update's trainer settings (Rein's trainer config section, less engine and placement), as Rein writes them for the trainer",
  );

export type TrainerConfig = z.output<typeof trainerConfigSchema>;

/** The settings a trainer needs, from the config's trainer section. */
export type TrainerHyperparameters = Pick<
  TrainerSettings,
  'learningRate' | 'epochs' | 'minibatchSize' | 'clipEpsilon' | 'maxGradNorm' | 'seed' | 'pytorch'
>;

export function trainerConfigOf(settings: TrainerHyperparameters): TrainerConfig {
  const { lora, device, dtype, maxTokensPerMicroBatch } = settings.pytorch;
  return trainerConfigSchema.parse({
    format: TRAINER_CONFIG_FORMAT,
    seed: settings.seed,
    learningRate: settings.learningRate,
    epochs: settings.epochs,
    minibatchSize: settings.minibatchSize,
    clipEpsilon: settings.clipEpsilon,
    maxGradNorm: settings.maxGradNorm,
    pytorch: { device, dtype, maxTokensPerMicroBatch, ...(lora && { lora }) },
  });
}

/** The JSON Schema the PyTorch trainer validates its config against (committed in trainer/). */
export function trainerConfigJsonSchema(): object {
  return z.toJSONSchema(trainerConfigSchema, { io: 'input' });
}

/** The rate the update trains at: a LoRA adapter's own when the PyTorch engine trains one and it is set. */
export function effectiveLearningRate(settings: Pick<TrainerSettings, 'engine' | 'learningRate' | 'pytorch'>): number {
  return settings.engine === 'pytorch'
    ? (settings.pytorch.lora?.learningRate ?? settings.learningRate)
    : settings.learningRate;
}

/** Writes an update's config beside its trainer log (in `logDir`, named after its output folder); returns the file. */
export function writeTrainerConfig(logDir: string, outputDir: string, config: TrainerConfig): string {
  mkdirSync(logDir, { recursive: true });
  const file = path.join(logDir, `${path.basename(outputDir)}.trainer-config.json`);
  writeFileSync(file, `${JSON.stringify(config, null, 2)}\n`);
  return file;
}
