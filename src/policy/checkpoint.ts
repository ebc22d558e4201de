import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ChatTokenizer } from '../tokenizer/chat-tokenizer.js';
import { tokenizerConfig, tokenizerJson, VOCAB_SIZE } from './chat-format.js';
import { TinyDecoder, type ModelConfig } from './model.js';

/**
 * A policy checkpoint is a Hugging Face-style model directory: config.json, tokenizer.json,
 * tokenizer_config.json (with the chat template) and model.safetensors — so the gateway, the
 * sample builder and any tool treat it like a real model directory.
 */
const configSchema = z.object({
  model_type: z.literal('rein-tiny-decoder'),
  vocab_size: z.number().int().positive(),
  n_positions: z.number().int().positive(),
  n_embd: z.number().int().positive(),
  n_layer: z.number().int().positive(),
  n_head: z.number().int().positive(),
  n_inner: z.number().int().positive(),
  /** Lineage and training facts, free-form. */
  rein: z.record(z.string(), z.unknown()).default({}),
});

export interface Checkpoint {
  dir: string;
  config: ModelConfig;
  model: TinyDecoder;
  tokenizer: ChatTokenizer;
  info: Record<string, unknown>;
}

export function defaultModelConfig(overrides: Partial<ModelConfig> = {}): ModelConfig {
  return { vocabSize: VOCAB_SIZE, contextLength: 192, dModel: 64, nLayers: 2, nHeads: 4, dFF: 256, ...overrides };
}

export function saveCheckpoint(dir: string, model: TinyDecoder, info: Record<string, unknown> = {}): void {
  mkdirSync(dir, { recursive: true });
  const c = model.config;
  const write = (name: string, data: string | Buffer) => {
    const tmp = path.join(dir, `.${name}.tmp`);
    writeFileSync(tmp, data);
    renameSync(tmp, path.join(dir, name));
  };
  write('model.safetensors', model.toSafetensors());
  write('tokenizer.json', JSON.stringify(tokenizerJson()));
  write('tokenizer_config.json', `${JSON.stringify(tokenizerConfig(), null, 2)}\n`);
  // config.json last: its presence marks a complete checkpoint.
  write(
    'config.json',
    `${JSON.stringify(
      {
        architectures: ['ReinTinyDecoder'],
        model_type: 'rein-tiny-decoder',
        vocab_size: c.vocabSize,
        n_positions: c.contextLength,
        n_embd: c.dModel,
        n_layer: c.nLayers,
        n_head: c.nHeads,
        n_inner: c.dFF,
        rein: info,
      },
      null,
      2,
    )}\n`,
  );
}

export function loadCheckpoint(dir: string): Checkpoint {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'));
  } catch (err) {
    throw new Error(`${dir} is not a policy checkpoint (config.json: ${(err as Error).message})`);
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    throw new Error(`${path.join(dir, 'config.json')}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  const p = parsed.data;
  const config: ModelConfig = { vocabSize: p.vocab_size, contextLength: p.n_positions, dModel: p.n_embd, nLayers: p.n_layer, nHeads: p.n_head, dFF: p.n_inner };
  return {
    dir,
    config,
    model: TinyDecoder.fromSafetensors(config, readFileSync(path.join(dir, 'model.safetensors'))),
    tokenizer: ChatTokenizer.fromDirectory(dir),
    info: p.rein,
  };
}
