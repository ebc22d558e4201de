/**
 * Produces the embedded default's base checkpoint: supervised warm start on demonstrations of the
 * example calculator task, deterministic for its seed, then a greedy held-out evaluation.
 *
 *   npx tsx scripts/warm-start.ts [--out DIR] [--steps N]
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { defaultModelConfig, loadCheckpoint, saveCheckpoint } from '../src/policy/checkpoint.js';
import { Qwen3Model, readyBackend } from '../src/policy/model.js';
import { evaluateGreedy, warmStart, type ArithmeticTask } from '../src/policy/warm-start.js';
import { ChatTokenizer } from '../src/tokenizer/chat-tokenizer.js';
import { tokenizerConfig, tokenizerJson } from '../src/policy/chat-format.js';

const { values } = parseArgs({
  options: {
    out: { type: 'string', default: 'models/base' },
    steps: { type: 'string', default: '250' },
    seed: { type: 'string', default: '1' },
    lr: { type: 'string', default: '0.003' },
  },
});
const root = path.resolve(import.meta.dirname, '..');
const tasks = (name: string) =>
  readFileSync(path.join(root, 'examples/calculator-agent', `${name}.jsonl`), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as ArithmeticTask);

const backend = await readyBackend();
const started = performance.now();
const seed = Number(values.seed);
const model = Qwen3Model.init(defaultModelConfig(), seed);
const tokenizer = new ChatTokenizer(tokenizerJson(), tokenizerConfig() as Record<string, unknown>);
const steps = Number(values.steps);
warmStart(model, tokenizer, tasks('train'), {
  steps,
  batchSize: 32,
  learningRate: Number(values.lr),
  seed,
  onStep: (step, loss) => {
    if (step % 50 === 0 || step === steps - 1) process.stderr.write(`step ${step} loss ${loss.toFixed(3)}\n`);
  },
});
const out = path.resolve(values.out as string);
const heldout = tasks('heldout');
const success = evaluateGreedy({ model, tokenizer }, heldout);
saveCheckpoint(out, model, {
  name: 'base',
  warmStart: { steps, seed, learningRate: Number(values.lr), heldoutGreedySuccess: success },
});
const reloaded = loadCheckpoint(out);
process.stdout.write(
  `${JSON.stringify({ out, backend, steps, seconds: (performance.now() - started) / 1000, heldoutGreedySuccess: success, reloadedSuccess: evaluateGreedy(reloaded, heldout.slice(0, 16)) })}\n`,
);
