/**
 * The embedded policy's speed on this machine, before and after in one run: the Qwen3 model
 * (models/base, key/value cache) against the previous architecture (ReinTinyDecoder: learned
 * positions, no cache), checked out from git at BEFORE into .bench/before so both run on the same
 * tfjs backend in the same process. Measures sampling tokens/s (32 rows) at a short prompt and at
 * a ~800-token context, and the time of one PPO step over 32 sequences.
 *
 *   npm run bench:policy [-- --before <git ref>] [-- --quick]
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { loadCheckpoint } from '../src/policy/checkpoint.js';
import { readyBackend } from '../src/policy/model.js';
import { GenerationScheduler } from '../src/policy/scheduler.js';
import { ppoStep } from '../src/policy/train.js';
import { demonstration } from '../src/policy/warm-start.js';
import { checkoutBefore } from './before.js';

/** The last commit with the previous architecture. */
const BEFORE = '04c1d99';
const { values } = parseArgs({
  options: { before: { type: 'string', default: BEFORE }, quick: { type: 'boolean', default: false } },
});
const root = path.resolve(import.meta.dirname, '..');

interface Engine {
  name: string;
  /** Tokens to sample after the long prompt: enough to time well above the prompt pass's noise. */
  decodeTokens: number;
  generate(prompts: number[][], maxTokens: number): void;
  ppoStep(sequences: Sequence[]): void;
  /** The policy server's continuous batching: one row per request, through the version's own scheduler. */
  serve(prompts: number[][], maxTokens: number, gapMs: number): Promise<void>;
}

interface SchedulerLike {
  generate(row: {
    checkpoint: unknown;
    prompt: number[];
    maxTokens: number;
    temperature: number;
    topP: number;
    seed: number;
    stopIds: number[];
    stopStrings: string[];
  }): Promise<unknown>;
}

/** Requests arriving gapMs apart, as concurrent harness calls do; resolves when all are answered. */
async function serveWith(
  scheduler: SchedulerLike,
  checkpoint: unknown,
  prompts: number[][],
  maxTokens: number,
  gapMs: number,
): Promise<void> {
  const pending: Array<Promise<unknown>> = [];
  for (const [i, prompt] of prompts.entries()) {
    pending.push(
      scheduler.generate({
        checkpoint,
        prompt,
        maxTokens,
        temperature: 1,
        topP: 1,
        seed: i,
        stopIds: [],
        stopStrings: [],
      }),
    );
    await new Promise((r) => setTimeout(r, gapMs));
  }
  await Promise.all(pending);
}
type Sequence = Parameters<typeof ppoStep>[2][number];

const backend = await readyBackend();
const base = loadCheckpoint(path.join(root, 'models/base'));
const demo = demonstration(base.tokenizer, { id: 'b', question: '37 times 78?', answer: 2886 });
const shortPrompt = base.tokenizer.encode('<|user|>37 times 78?<|end|><|assistant|>');
// ~800 tokens: a long conversation of tool calls and results, as a multi-turn harness builds.
const turn = base.tokenizer.encode('<tool_call>calc{"x":"37*78"}</tool_call><|end|><|tool|>2886<|end|><|assistant|>');
const longPrompt = [
  ...shortPrompt,
  ...Array.from({ length: Math.ceil((800 - shortPrompt.length) / turn.length) }, () => turn).flat(),
].slice(0, 800);
const sequences: Sequence[] = Array.from({ length: 32 }, (_, i) => ({
  rolloutId: `r${i}`,
  ids: demo.ids,
  lossMask: demo.lossMask,
  advantages: demo.ids.map(() => (i % 2 ? 1 : -1)),
  oldLogprobs: demo.ids.map(() => -1),
  lossWeights: demo.lossMask.map((m) => m / 32),
  policyVersions: demo.ids.map(() => 'base'),
}));

function after(): Engine {
  const optimizer = tf.train.adam(1e-4);
  return {
    decodeTokens: 192,
    name: `Qwen3 (models/base: hidden ${base.config.hiddenSize}, ${base.config.numLayers} layers, ${base.config.numHeads}/${base.config.numKvHeads} heads, context ${base.config.maxPositions}, KV cache)`,
    generate: (prompts, maxTokens) => base.model.generate(prompts, { maxTokens, temperature: 1, stopIds: [], seed: 1 }),
    ppoStep: (batch) => ppoStep(base.model, optimizer, batch, { clipEpsilon: 0.2, maxGradNorm: 1 }),
    serve: (prompts, maxTokens, gapMs) => serveWith(new GenerationScheduler(), base, prompts, maxTokens, gapMs),
  };
}

/**
 * The previous architecture from git, sized as it shipped (d 64, 2 layers, 4 heads, FF 256) with a context long enough
 * for the long prompt.
 */
async function before(ref: string): Promise<Engine> {
  const dir = checkoutBefore(ref);
  const old = (await import(pathToFileURL(path.join(dir, 'src/policy/model.ts')).href)) as {
    TinyDecoder: { init(config: object, seed: number): { generate(p: number[][], o: object): unknown } };
  };
  const oldTrain = (await import(pathToFileURL(path.join(dir, 'src/policy/train.ts')).href)) as {
    ppoStep(m: unknown, o: tf.Optimizer, s: Sequence[], opts: object): unknown;
  };
  const oldScheduler = (await import(pathToFileURL(path.join(dir, 'src/policy/scheduler.ts')).href)) as {
    GenerationScheduler: new () => SchedulerLike;
  };
  const model = old.TinyDecoder.init(
    { vocabSize: base.config.vocabSize, contextLength: 1024, dModel: 64, nLayers: 2, nHeads: 4, dFF: 256 },
    1,
  );
  const optimizer = tf.train.adam(1e-4);
  return {
    decodeTokens: 8,
    name: `ReinTinyDecoder at ${ref} (d 64, 2 layers, 4 heads, learned positions, no cache)`,
    generate: (prompts, maxTokens) => model.generate(prompts, { maxTokens, temperature: 1, stopIds: [], seed: 1 }),
    ppoStep: (batch) => oldTrain.ppoStep(model, optimizer, batch, { clipEpsilon: 0.2, maxGradNorm: 1 }),
    serve: (prompts, maxTokens, gapMs) =>
      serveWith(
        new oldScheduler.GenerationScheduler(),
        { model, tokenizer: base.tokenizer },
        prompts,
        maxTokens,
        gapMs,
      ),
  };
}

function timed(run: () => void, repeats: number): number {
  run(); // warm-up
  const t0 = performance.now();
  for (let i = 0; i < repeats; i++) run();
  return (performance.now() - t0) / repeats;
}

async function measureServing(engine: Engine): Promise<number> {
  // 64 calls of a multi-turn conversation (~60-token prompts) arriving 5 ms apart, 24 tokens each.
  const prompt = [...shortPrompt, ...turn];
  const requests = values.quick ? 32 : 64;
  await engine.serve([prompt], 4, 0); // warm-up
  const t0 = performance.now();
  await engine.serve(
    Array.from({ length: requests }, () => prompt),
    24,
    5,
  );
  return (requests * 24) / ((performance.now() - t0) / 1000);
}

function measure(engine: Engine) {
  const rows = 32;
  const shortTokens = values.quick ? 16 : 32;
  const longRows = values.quick ? 4 : 8;
  const longTokens = engine.decodeTokens;
  const short = timed(
    () =>
      engine.generate(
        Array.from({ length: rows }, () => shortPrompt),
        shortTokens,
      ),
    values.quick ? 1 : 3,
  );
  // At a long context the prompt pass (prefill) and the tokens after it cost differently: the
  // first token's time is the prefill, the rest is decoding.
  const longBatch = Array.from({ length: longRows }, () => longPrompt);
  const prefill = timed(() => engine.generate(longBatch, 1), 3);
  const long = timed(() => engine.generate(longBatch, 1 + longTokens), 3);
  const step = timed(() => engine.ppoStep(sequences), values.quick ? 2 : 5);
  return {
    short: (rows * shortTokens) / (short / 1000),
    prefill,
    decode: (longRows * longTokens) / (Math.max(long - prefill, 1e-3) / 1000),
    step,
  };
}

const engines = [await before(values.before as string), after()];
const results = [];
for (const e of engines) results.push({ name: e.name, ...measure(e), serving: await measureServing(e) });
const [old, now] = results as [(typeof results)[number], (typeof results)[number]];
const rows = values.quick ? 4 : 8;
console.log(`Embedded policy, backend ${backend}; baseline: ${old.name}; new: ${now.name}.\n`);
console.log('| measure | before | after | after / before |');
console.log('|---|---|---|---|');
console.log(
  `| sampling, 32 rows, ${shortPrompt.length}-token prompt (tokens/s) | ${old.short.toFixed(0)} | ${now.short.toFixed(0)} | ${(now.short / old.short).toFixed(2)} |`,
);
console.log(
  `| prompt pass, ${rows} rows of ${longPrompt.length} tokens, first token (ms) | ${old.prefill.toFixed(0)} | ${now.prefill.toFixed(0)} | ${(now.prefill / old.prefill).toFixed(2)} |`,
);
console.log(
  `| sampling after it, ${rows} rows at a ${longPrompt.length}-token context (tokens/s; ${old.name.startsWith('ReinTiny') ? engines[0]!.decodeTokens : ''} vs ${engines[1]!.decodeTokens} tokens timed) | ${old.decode.toFixed(1)} | ${now.decode.toFixed(1)} | ${(now.decode / old.decode).toFixed(2)} |`,
);
console.log(
  `| policy server batching: ${values.quick ? 32 : 64} requests 5 ms apart, ${shortPrompt.length + turn.length}-token prompts, 24 tokens each (tokens/s) | ${old.serving.toFixed(0)} | ${now.serving.toFixed(0)} | ${(now.serving / old.serving).toFixed(2)} |`,
);
console.log(
  `| PPO step, 32 sequences of ${demo.ids.length} tokens (ms) | ${old.step.toFixed(0)} | ${now.step.toFixed(0)} | ${(now.step / old.step).toFixed(2)} |`,
);
