import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { decodeSafetensors, encodeSafetensors, type Tensor } from '../samples/safetensors.js';
import { ChatTokenizer } from '../tokenizer/chat-tokenizer.js';
import { END_OF_TURN, specialTokenId, tokenizerConfig, tokenizerJson, VOCAB_SIZE } from './chat-format.js';
import { floatValues, Qwen3Model, type ModelConfig } from './model.js';

/**
 * A policy checkpoint is a Hugging Face model folder — config.json (`Qwen3ForCausalLM`),
 * model.safetensors, tokenizer.json, tokenizer_config.json (with the chat template) — or a PEFT
 * LoRA adapter folder (adapter_config.json, adapter_model.safetensors) on such a base, merged at
 * load as vLLM applies it. Lineage and training facts live beside the weights in rein.json.
 */
export interface Checkpoint {
  dir: string;
  config: ModelConfig;
  model: Qwen3Model;
  tokenizer: ChatTokenizer;
  /** The folder the tokenizer files came from (an adapter without its own: its base). */
  tokenizerDir: string;
  /** rein.json: lineage (parent, base, batch content hash) and training facts. */
  info: Record<string, unknown>;
  /** Set when the folder is a LoRA adapter: the base folder it was merged into. */
  adapter?: { base: string; rank: number; alpha: number; targetModules: string[] };
}

const positive = z.number().int().positive();
const qwen3ConfigSchema = z
  .object({
    model_type: z.string(),
    vocab_size: positive,
    hidden_size: positive,
    intermediate_size: positive,
    num_hidden_layers: positive,
    num_attention_heads: positive,
    num_key_value_heads: positive.optional(),
    head_dim: positive.optional(),
    max_position_embeddings: positive,
    rms_norm_eps: z.number().positive().default(1e-6),
    rope_theta: z.number().positive().optional(),
    rope_parameters: z
      .object({ rope_type: z.string().default('default'), rope_theta: z.number().positive().optional() })
      .passthrough()
      .nullish(),
    rope_scaling: z.object({ rope_type: z.string().optional(), type: z.string().optional() }).passthrough().nullish(),
    tie_word_embeddings: z.boolean().default(false),
    hidden_act: z.literal('silu').default('silu'),
    attention_bias: z
      .literal(false, { message: 'attention biases are not supported by the embedded policy' })
      .default(false),
    use_sliding_window: z
      .literal(false, { message: 'sliding-window attention is not supported by the embedded policy' })
      .default(false),
  })
  .passthrough();

const adapterConfigSchema = z
  .object({
    peft_type: z.literal('LORA', { message: 'only LoRA adapters are supported' }),
    base_model_name_or_path: z.string().min(1),
    r: positive,
    lora_alpha: z.number().positive(),
    target_modules: z.union([z.array(z.string()), z.string()]),
    use_rslora: z.boolean().default(false),
    use_dora: z.literal(false, { message: 'DoRA adapters are not supported' }).default(false),
    fan_in_fan_out: z.literal(false, { message: 'fan_in_fan_out adapters are not supported' }).default(false),
    bias: z
      .literal('none', { message: 'adapters that train biases are not supported (bias must be "none")' })
      .default('none'),
    modules_to_save: z.null({ message: 'adapters with modules_to_save are not supported' }).nullish(),
    rank_pattern: z.record(z.string(), z.number()).default({}),
    alpha_pattern: z.record(z.string(), z.number()).default({}),
  })
  .passthrough();

/** The embedded default's shape: a tiny Qwen3 over the byte-level chat vocabulary. */
export function defaultModelConfig(overrides: Partial<ModelConfig> = {}): ModelConfig {
  return {
    vocabSize: VOCAB_SIZE,
    hiddenSize: 64,
    intermediateSize: 256,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 16,
    maxPositions: 1024,
    ropeTheta: 10000,
    rmsNormEps: 1e-6,
    tieWordEmbeddings: true,
    ...overrides,
  };
}

/** config.json as transformers writes a Qwen3Config (both rope spellings, for older readers and vLLM). */
export function hfConfig(c: ModelConfig): Record<string, unknown> {
  return {
    architectures: ['Qwen3ForCausalLM'],
    model_type: 'qwen3',
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    hidden_act: 'silu',
    max_position_embeddings: c.maxPositions,
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    rope_parameters: { rope_type: 'default', rope_theta: c.ropeTheta },
    rope_scaling: null,
    tie_word_embeddings: c.tieWordEmbeddings,
    attention_bias: false,
    attention_dropout: 0,
    use_sliding_window: false,
    sliding_window: null,
    initializer_range: 0.02,
    use_cache: true,
    bos_token_id: null,
    eos_token_id: specialTokenId(END_OF_TURN),
    pad_token_id: specialTokenId('<|endoftext|>'),
    torch_dtype: 'float32',
    dtype: 'float32',
  };
}

const TOKENIZER_FILES = [
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'generation_config.json',
  'chat_template.jinja',
];

/**
 * Writes a full model folder. The tokenizer files are copied from `tokenizerFrom` (the parent's,
 * byte for byte, so batches built with it still match) or, for a new base, generated.
 */
export function saveCheckpoint(
  dir: string,
  model: Qwen3Model,
  info: Record<string, unknown> = {},
  options: { tokenizerFrom?: string } = {},
): void {
  mkdirSync(dir, { recursive: true });
  const write = (name: string, data: string | Buffer) => {
    const tmp = path.join(dir, `.${name}.tmp`);
    writeFileSync(tmp, data);
    renameSync(tmp, path.join(dir, name));
  };
  write('model.safetensors', encodeSafetensors(model.toTensors(), { format: 'pt' }));
  if (options.tokenizerFrom) {
    for (const name of TOKENIZER_FILES) {
      if (existsSync(path.join(options.tokenizerFrom, name)))
        copyFileSync(path.join(options.tokenizerFrom, name), path.join(dir, name));
    }
  } else {
    write('tokenizer.json', JSON.stringify(tokenizerJson()));
    write('tokenizer_config.json', `${JSON.stringify(tokenizerConfig(), null, 2)}\n`);
    write(
      'generation_config.json',
      `${JSON.stringify({ eos_token_id: specialTokenId(END_OF_TURN), pad_token_id: specialTokenId('<|endoftext|>') }, null, 2)}\n`,
    );
  }
  write('rein.json', `${JSON.stringify(info, null, 2)}\n`);
  // config.json last: its presence marks a complete checkpoint.
  write('config.json', `${JSON.stringify(hfConfig(model.config), null, 2)}\n`);
}

function readJson(file: string, what: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`${path.dirname(file)} is not a policy checkpoint (${what}: ${(err as Error).message})`);
  }
}

function issues(file: string, error: z.ZodError): Error {
  return new Error(`${file}: ${error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; ')}`);
}

/** Reads config.json of a full model folder into the embedded model's config; names what does not fit. */
export function readModelConfig(dir: string): ModelConfig {
  const file = path.join(dir, 'config.json');
  const parsed = qwen3ConfigSchema.safeParse(readJson(file, 'config.json'));
  if (!parsed.success) throw issues(file, parsed.error);
  const p = parsed.data;
  if (p.model_type !== 'qwen3') {
    throw new Error(
      `${file}: model_type is ${p.model_type}; the embedded policy runs Qwen3ForCausalLM (model_type qwen3) — serve other architectures with vLLM`,
    );
  }
  const ropeType = p.rope_parameters?.rope_type ?? p.rope_scaling?.rope_type ?? p.rope_scaling?.type ?? 'default';
  if (ropeType !== 'default')
    throw new Error(
      `${file}: rope type ${ropeType} is not supported by the embedded policy (only default rotary positions)`,
    );
  return {
    vocabSize: p.vocab_size,
    hiddenSize: p.hidden_size,
    intermediateSize: p.intermediate_size,
    numLayers: p.num_hidden_layers,
    numHeads: p.num_attention_heads,
    numKvHeads: p.num_key_value_heads ?? p.num_attention_heads,
    headDim: p.head_dim ?? p.hidden_size / p.num_attention_heads,
    maxPositions: p.max_position_embeddings,
    ropeTheta: p.rope_parameters?.rope_theta ?? p.rope_theta ?? 10000,
    rmsNormEps: p.rms_norm_eps,
    tieWordEmbeddings: p.tie_word_embeddings,
  };
}

/** The weights of a model folder: model.safetensors, or the shards its index names. */
function readWeights(dir: string): Record<string, Tensor> {
  const single = path.join(dir, 'model.safetensors');
  if (existsSync(single)) return decodeSafetensors(readFileSync(single)).tensors;
  const indexFile = path.join(dir, 'model.safetensors.index.json');
  if (!existsSync(indexFile))
    throw new Error(
      `${dir} has no model.safetensors (nor a model.safetensors.index.json); save the model with safetensors`,
    );
  const index = readJson(indexFile, 'model.safetensors.index.json') as { weight_map?: Record<string, string> };
  const tensors: Record<string, Tensor> = {};
  for (const shard of new Set(Object.values(index.weight_map ?? {})))
    Object.assign(tensors, decodeSafetensors(readFileSync(path.join(dir, shard))).tensors);
  return tensors;
}

function readInfo(dir: string): Record<string, unknown> {
  const file = path.join(dir, 'rein.json');
  return existsSync(file) ? (readJson(file, 'rein.json') as Record<string, unknown>) : {};
}

export function isAdapter(dir: string): boolean {
  return existsSync(path.join(dir, 'adapter_config.json'));
}

/** For a local LoRA adapter folder, the base model folder it applies to; undefined for anything else. */
export function adapterBaseOf(dir: string): string | undefined {
  if (!isAdapter(dir)) return undefined;
  const base = (
    readJson(path.join(dir, 'adapter_config.json'), 'adapter_config.json') as { base_model_name_or_path?: unknown }
  ).base_model_name_or_path;
  return typeof base === 'string' ? path.resolve(dir, base) : undefined;
}

export function loadCheckpoint(dir: string): Checkpoint {
  if (isAdapter(dir)) return loadAdapter(dir);
  if (!existsSync(path.join(dir, 'config.json')))
    throw new Error(`${dir} is not a policy checkpoint (no config.json or adapter_config.json)`);
  const config = readModelConfig(dir);
  return {
    dir,
    config,
    model: Qwen3Model.fromTensors(config, readWeights(dir)),
    tokenizer: ChatTokenizer.fromDirectory(dir),
    tokenizerDir: dir,
    info: readInfo(dir),
  };
}

/** A LoRA adapter merged into its base: W ← W + s·B·A per target module, s = α/r (α/√r with rsLoRA). */
function loadAdapter(dir: string): Checkpoint {
  const file = path.join(dir, 'adapter_config.json');
  const parsed = adapterConfigSchema.safeParse(readJson(file, 'adapter_config.json'));
  if (!parsed.success) throw issues(file, parsed.error);
  const a = parsed.data;
  const base = path.resolve(dir, a.base_model_name_or_path);
  if (isAdapter(base) || !existsSync(path.join(base, 'config.json'))) {
    throw new Error(
      `${file}: base_model_name_or_path ${a.base_model_name_or_path} is not a local full model folder; an adapter for the embedded policy names the folder of its base model`,
    );
  }
  const config = readModelConfig(base);
  const tensors = readWeights(base);
  const adapterFile = path.join(dir, 'adapter_model.safetensors');
  if (!existsSync(adapterFile)) throw new Error(`${dir} has no adapter_model.safetensors`);
  const lora = decodeSafetensors(readFileSync(adapterFile)).tensors;
  const modules = new Set<string>();
  for (const name of Object.keys(lora)) {
    const m = /^base_model\.model\.(.+)\.lora_([AB])(?:\.[^.]+)?\.weight$/.exec(name);
    if (!m)
      throw new Error(
        `${adapterFile}: tensor ${name} is not a LoRA A/B weight of a linear layer (embedding adapters and extra modules are not supported)`,
      );
    modules.add(m[1] as string);
  }
  const patternValue = (patterns: Record<string, number>, module: string) =>
    Object.entries(patterns).find(([key]) => new RegExp(`(^|\\.)${key}$`).test(module))?.[1];
  for (const module of modules) {
    const find = (which: 'A' | 'B') =>
      lora[`base_model.model.${module}.lora_${which}.weight`] ??
      lora[`base_model.model.${module}.lora_${which}.default.weight`];
    const [A, B] = [find('A'), find('B')];
    const target = tensors[`${module}.weight`];
    if (!A || !B) throw new Error(`${adapterFile}: ${module} lacks its lora_A or lora_B weight`);
    if (!target || target.shape.length !== 2)
      throw new Error(
        `${adapterFile}: ${module} is not a linear layer of the base model ${base}; the adapter was trained for another model`,
      );
    const [out, inp] = target.shape as [number, number];
    const rank = A.shape[0] as number;
    if (A.shape.join('x') !== `${rank}x${inp}` || B.shape.join('x') !== `${out}x${rank}`) {
      throw new Error(
        `${adapterFile}: ${module} has lora_A ${A.shape.join('x')} and lora_B ${B.shape.join('x')}, which do not fit the base weight ${out}x${inp}; the adapter was trained for another model`,
      );
    }
    const alpha = patternValue(a.alpha_pattern, module) ?? a.lora_alpha;
    const scale = a.use_rslora ? alpha / Math.sqrt(rank) : alpha / rank;
    const [w, av, bv] = [Float32Array.from(floatValues(target)), floatValues(A), floatValues(B)];
    for (let o = 0; o < out; o++) {
      for (let r = 0; r < rank; r++) {
        const b = (bv[o * rank + r] as number) * scale;
        if (b === 0) continue;
        for (let i = 0; i < inp; i++) w[o * inp + i] = (w[o * inp + i] as number) + b * (av[r * inp + i] as number);
      }
    }
    tensors[`${module}.weight`] = { dtype: 'F32', shape: target.shape, data: w };
  }
  const tokenizerDir = existsSync(path.join(dir, 'tokenizer.json')) ? dir : base;
  return {
    dir,
    config,
    model: Qwen3Model.fromTensors(config, tensors),
    tokenizer: ChatTokenizer.fromDirectory(tokenizerDir),
    tokenizerDir,
    info: readInfo(dir),
    adapter: {
      base,
      rank: a.r,
      alpha: a.lora_alpha,
      targetModules: [...modules].map((m) => m.split('.').at(-1) as string).filter((m, i, all) => all.indexOf(m) === i),
    },
  };
}
