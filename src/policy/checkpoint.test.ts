import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultModelConfig, loadCheckpoint, saveCheckpoint } from './checkpoint.js';
import { readyBackend, TinyDecoder } from './model.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-checkpoint-'));
beforeAll(() => readyBackend());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('policy checkpoints', () => {
  it('are Hugging Face-style model directories that load back to the same model', () => {
    const model = TinyDecoder.init(defaultModelConfig({ contextLength: 32, dModel: 16, nHeads: 2, dFF: 32 }), 4);
    const target = path.join(dir, 'v1');
    saveCheckpoint(target, model, { parent: null, iteration: 0 });
    const loaded = loadCheckpoint(target);
    expect(loaded.info).toEqual({ parent: null, iteration: 0 });
    expect(loaded.model.logits([[1, 2, 3]]).arraySync()).toEqual(model.logits([[1, 2, 3]]).arraySync());
    // The files are what HF tooling expects.
    const config = JSON.parse(readFileSync(path.join(target, 'config.json'), 'utf8'));
    expect(config).toMatchObject({ model_type: 'rein-tiny-decoder', vocab_size: 264, n_positions: 32 });
    const hf = new Tokenizer(JSON.parse(readFileSync(path.join(target, 'tokenizer.json'), 'utf8')), {});
    expect(hf.decode(hf.encode('<|user|>hi<|end|>', { add_special_tokens: false }).ids, { skip_special_tokens: false })).toBe('<|user|>hi<|end|>');
    expect(loaded.tokenizer.render({ messages: [{ role: 'user', content: 'hi' }] }, true)).toBe('<|user|>hi<|end|><|assistant|>');
    model.dispose();
    loaded.model.dispose();
  });

  it('names what is wrong with a directory that is not a checkpoint', () => {
    expect(() => loadCheckpoint(path.join(dir, 'missing'))).toThrow(/is not a policy checkpoint/);
    const bad = path.join(dir, 'bad');
    saveCheckpoint(bad, TinyDecoder.init(defaultModelConfig({ contextLength: 8, dModel: 8, nHeads: 2, dFF: 8, nLayers: 1 }), 1));
    const config = JSON.parse(readFileSync(path.join(bad, 'config.json'), 'utf8'));
    writeFileSync(path.join(bad, 'config.json'), JSON.stringify({ ...config, n_embd: 'wide' }));
    expect(() => loadCheckpoint(bad)).toThrow(/config\.json: n_embd: /);
  });
});
