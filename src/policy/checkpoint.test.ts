import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeSafetensors, type Tensor } from '../samples/safetensors.js';
import { defaultModelConfig, loadCheckpoint, saveCheckpoint } from './checkpoint.js';
import { floatValues, Qwen3Model, readyBackend } from './model.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-checkpoint-'));
const small = defaultModelConfig({
  maxPositions: 32,
  hiddenSize: 16,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 8,
  intermediateSize: 32,
});
beforeAll(() => readyBackend());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('policy checkpoints', () => {
  it('are Hugging Face Qwen3 model folders that load back to the same model', () => {
    const model = Qwen3Model.init(small, 4);
    const target = path.join(dir, 'v1');
    saveCheckpoint(target, model, { parent: null, iteration: 0 });
    const loaded = loadCheckpoint(target);
    expect(loaded.info).toEqual({ parent: null, iteration: 0 });
    expect(loaded.model.logits([[1, 2, 3]]).arraySync()).toEqual(model.logits([[1, 2, 3]]).arraySync());
    // The files are what transformers and vLLM expect.
    const config = JSON.parse(readFileSync(path.join(target, 'config.json'), 'utf8'));
    expect(config).toMatchObject({
      architectures: ['Qwen3ForCausalLM'],
      model_type: 'qwen3',
      vocab_size: 264,
      hidden_size: 16,
      max_position_embeddings: 32,
      tie_word_embeddings: true,
    });
    const hf = new Tokenizer(JSON.parse(readFileSync(path.join(target, 'tokenizer.json'), 'utf8')), {});
    expect(
      hf.decode(hf.encode('<|user|>hi<|end|>', { add_special_tokens: false }).ids, { skip_special_tokens: false }),
    ).toBe('<|user|>hi<|end|>');
    expect(loaded.tokenizer.render({ messages: [{ role: 'user', content: 'hi' }] }, true)).toBe(
      '<|user|>hi<|end|><|assistant|>',
    );
    // A child copies its parent's tokenizer files byte for byte.
    saveCheckpoint(path.join(dir, 'v2'), model, {}, { tokenizerFrom: target });
    expect(readFileSync(path.join(dir, 'v2', 'tokenizer.json'))).toEqual(
      readFileSync(path.join(target, 'tokenizer.json')),
    );
    model.dispose();
    loaded.model.dispose();
  });

  it('names what is wrong with a folder that is not a checkpoint, or of another architecture', () => {
    expect(() => loadCheckpoint(path.join(dir, 'missing'))).toThrow(/is not a policy checkpoint/);
    const bad = path.join(dir, 'bad');
    saveCheckpoint(
      bad,
      Qwen3Model.init(
        defaultModelConfig({
          maxPositions: 8,
          hiddenSize: 8,
          numHeads: 2,
          numKvHeads: 1,
          headDim: 4,
          intermediateSize: 8,
          numLayers: 1,
        }),
        1,
      ),
    );
    const config = JSON.parse(readFileSync(path.join(bad, 'config.json'), 'utf8'));
    writeFileSync(path.join(bad, 'config.json'), JSON.stringify({ ...config, hidden_size: 'wide' }));
    expect(() => loadCheckpoint(bad)).toThrow(/config\.json: hidden_size: /);
    writeFileSync(path.join(bad, 'config.json'), JSON.stringify({ ...config, model_type: 'llama' }));
    expect(() => loadCheckpoint(bad)).toThrow(/model_type is llama; the embedded policy runs Qwen3ForCausalLM/);
    writeFileSync(path.join(bad, 'config.json'), JSON.stringify({ ...config, hidden_size: 16 }));
    expect(() => loadCheckpoint(bad)).toThrow(
      /weights do not fit the config: model\.embed_tokens\.weight is 264x8, expected 264x16/,
    );
  });

  it('load a PEFT LoRA adapter merged into its base: W + (alpha/r)·B·A', () => {
    const model = Qwen3Model.init(small, 8);
    const base = path.join(dir, 'lora-base');
    saveCheckpoint(base, model, { name: 'base' });
    const rank = 2;
    const adapterDir = path.join(dir, 'lora-v1');
    mkdirSync(adapterDir, { recursive: true });
    const random = (n: number, seed: number) =>
      Float32Array.from({ length: n }, (_, i) => Math.sin(seed * 1000 + i) * 0.1);
    const q = 'model.layers.0.self_attn.q_proj';
    const lora: Record<string, Tensor> = {
      [`base_model.model.${q}.lora_A.weight`]: { dtype: 'F32', shape: [rank, 16], data: random(rank * 16, 1) },
      [`base_model.model.${q}.lora_B.weight`]: { dtype: 'F32', shape: [16, rank], data: random(16 * rank, 2) },
    };
    writeFileSync(path.join(adapterDir, 'adapter_model.safetensors'), encodeSafetensors(lora, { format: 'pt' }));
    writeFileSync(
      path.join(adapterDir, 'adapter_config.json'),
      JSON.stringify({
        peft_type: 'LORA',
        task_type: 'CAUSAL_LM',
        base_model_name_or_path: base,
        r: rank,
        lora_alpha: 8,
        target_modules: ['q_proj'],
        bias: 'none',
        use_rslora: false,
        use_dora: false,
        fan_in_fan_out: false,
      }),
    );
    writeFileSync(path.join(adapterDir, 'rein.json'), JSON.stringify({ parent: base, base, format: 'lora' }));
    const loaded = loadCheckpoint(adapterDir);
    expect(loaded.adapter).toMatchObject({ base, rank: 2, alpha: 8, targetModules: ['q_proj'] });
    expect(loaded.info).toMatchObject({ format: 'lora' });
    const merged = floatValues(loaded.model.toTensors()[`${q}.weight`] as Tensor);
    const original = floatValues(model.toTensors()[`${q}.weight`] as Tensor);
    const [A, B] = [
      lora[`base_model.model.${q}.lora_A.weight`]!.data as Float32Array,
      lora[`base_model.model.${q}.lora_B.weight`]!.data as Float32Array,
    ];
    for (const [o, i] of [
      [0, 0],
      [3, 7],
      [15, 15],
    ] as const) {
      const delta = (8 / rank) * (B[o * rank]! * A[i]! + B[o * rank + 1]! * A[16 + i]!);
      expect(merged[o * 16 + i]).toBeCloseTo(original[o * 16 + i]! + delta, 5);
    }
    // Untargeted weights are the base's.
    expect(loaded.model.toTensors()['model.layers.0.self_attn.v_proj.weight']!.data).toEqual(
      model.toTensors()['model.layers.0.self_attn.v_proj.weight']!.data,
    );
    loaded.model.dispose();

    // An adapter for another shape of model is refused with what does not fit.
    const wrong = path.join(dir, 'lora-wrong');
    mkdirSync(wrong, { recursive: true });
    writeFileSync(path.join(wrong, 'adapter_config.json'), readFileSync(path.join(adapterDir, 'adapter_config.json')));
    writeFileSync(
      path.join(wrong, 'adapter_model.safetensors'),
      encodeSafetensors({
        [`base_model.model.${q}.lora_A.weight`]: { dtype: 'F32', shape: [rank, 32], data: random(rank * 32, 1) },
        [`base_model.model.${q}.lora_B.weight`]: { dtype: 'F32', shape: [16, rank], data: random(16 * rank, 2) },
      }),
    );
    expect(() => loadCheckpoint(wrong)).toThrow(
      /do not fit the base weight 16x16; the adapter was trained for another model/,
    );
    model.dispose();
  });
});
