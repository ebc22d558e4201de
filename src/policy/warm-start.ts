import * as tf from '@tensorflow/tfjs';
import type { ChatTokenizer } from '../tokenizer/chat-tokenizer.js';
import { END_OF_TURN, parseToolCalls, specialTokenId } from './chat-format.js';
import type { Checkpoint } from './checkpoint.js';
import { seededRandom } from '../random.js';
import type { Qwen3Model } from './model.js';
import { sftStep } from './train.js';

/**
 * The base checkpoint's warm start: supervised training on synthetic demonstrations of the
 * calculator task in the policy's own chat format, and a greedy evaluation that plays the
 * harness's protocol in-process (tool call → tool result → answer).
 */
export interface ArithmeticTask {
  id: string;
  question: string;
  answer: number;
}

const FORMS: Array<{ pattern: RegExp; op: string; fromMemory: number }> = [
  { pattern: /^(\d+) plus (\d+)\?$/, op: '+', fromMemory: 0.75 },
  { pattern: /^(\d+) times (\d+)\?$/, op: '*', fromMemory: 0.15 },
  { pattern: /^(\d+) minus (\d+)\?$/, op: '-', fromMemory: 0.15 },
  { pattern: /^(\d+) apples and (\d+) more\?$/, op: '+', fromMemory: 0.75 },
];

function formOf(task: ArithmeticTask) {
  for (const form of FORMS) {
    const m = form.pattern.exec(task.question);
    if (m) return { ...form, a: m[1] as string, b: m[2] as string };
  }
  throw new Error(`no demonstration for task ${task.id}: ${task.question}`);
}

/** The expression a correct agent sends to the calculator for a task. */
export function expressionFor(task: ArithmeticTask): string {
  const { a, op, b } = formOf(task);
  return `${a}${op}${b}`;
}

/**
 * How often the demonstrations of a task's form answer from memory instead of calling the
 * calculator. The base policy thus mostly guesses sums (and is mostly wrong) while it still
 * tries the calculator now and then: a habit with a clear reward signal for RL to correct, as
 * a production agent that under-uses a tool would have.
 */
export function fromMemoryShare(task: ArithmeticTask): number {
  return formOf(task).fromMemory;
}

/**
 * A demonstration as one training sequence: the whole episode, with the assistant's turns
 * trained. With the calculator: call, result, answer; from memory: the answer at once.
 */
export function demonstration(
  tokenizer: ChatTokenizer,
  task: ArithmeticTask,
  style: 'calculator' | 'memory' = 'calculator',
): { ids: number[]; lossMask: number[] } {
  const pieces: Array<[string, 0 | 1]> =
    style === 'memory'
      ? [
          [`<|user|>${task.question}<|end|><|assistant|>`, 0],
          [`${task.answer}<|end|>`, 1],
        ]
      : [
          [`<|user|>${task.question}<|end|><|assistant|>`, 0],
          [`<tool_call>calc${JSON.stringify({ x: expressionFor(task) })}</tool_call><|end|>`, 1],
          [`<|tool|>${task.answer}<|end|><|assistant|>`, 0],
          [`${task.answer}<|end|>`, 1],
        ];
  const ids: number[] = [];
  const lossMask: number[] = [];
  for (const [text, mask] of pieces) {
    const encoded = tokenizer.encode(text);
    ids.push(...encoded);
    lossMask.push(...encoded.map(() => mask));
  }
  return { ids, lossMask };
}

export function warmStart(
  model: Qwen3Model,
  tokenizer: ChatTokenizer,
  tasks: readonly ArithmeticTask[],
  options: {
    steps: number;
    batchSize: number;
    learningRate: number;
    seed: number;
    onStep?: (step: number, loss: number) => void;
  },
): void {
  const random = seededRandom(options.seed);
  const demos = tasks.map((t) => ({
    calculator: demonstration(tokenizer, t),
    memory: demonstration(tokenizer, t, 'memory'),
    fromMemory: fromMemoryShare(t),
  }));
  const optimizer = tf.train.adam(options.learningRate);
  for (let step = 0; step < options.steps; step++) {
    const batch = Array.from({ length: options.batchSize }, () => {
      const demo = demos[Math.floor(random() * demos.length)] as (typeof demos)[number];
      return random() < demo.fromMemory ? demo.memory : demo.calculator;
    });
    const { loss } = sftStep(model, optimizer, batch, 1);
    options.onStep?.(step, loss);
  }
  optimizer.dispose();
}

/** Integer arithmetic of the demonstrated form `A op B`. */
function calculate(expression: string): number | undefined {
  const m = /^(\d+)([-+*])(\d+)$/.exec(expression);
  if (!m) return undefined;
  const [a, b] = [Number(m[1]), Number(m[3])];
  return m[2] === '+' ? a + b : m[2] === '-' ? a - b : a * b;
}

/** Greedy success rate on tasks, playing the harness's protocol against the model directly. */
export function evaluateGreedy(
  checkpoint: Pick<Checkpoint, 'model' | 'tokenizer'>,
  tasks: readonly ArithmeticTask[],
): number {
  const { model, tokenizer } = checkpoint;
  const stop = [specialTokenId(END_OF_TURN)];
  const reply = (prompts: number[][]) =>
    model
      .generate(prompts, { maxTokens: 40, temperature: 0, stopIds: stop, seed: 0 })
      .map((r) => tokenizer.decode(r.ids).replace(END_OF_TURN, ''));
  const first = reply(tasks.map((t) => tokenizer.encode(`<|user|>${t.question}<|end|><|assistant|>`)));
  const followUps = tasks.map((t, i) => {
    const parsed = parseToolCalls(first[i] as string);
    const call = parsed.toolCalls[0];
    if (!call) return undefined;
    const x = (JSON.parse(call.function.arguments) as { x?: unknown }).x;
    const result = typeof x === 'string' ? calculate(x) : undefined;
    return tokenizer.encode(
      `<|user|>${t.question}<|end|><|assistant|>${first[i]}<|end|><|tool|>${result ?? 'error'}<|end|><|assistant|>`,
    );
  });
  const asked = followUps.map((p, i) => ({ p, i })).filter((x): x is { p: number[]; i: number } => x.p !== undefined);
  const followUpAnswers = asked.length ? reply(asked.map((x) => x.p)) : [];
  // Without a tool call, the first reply is the answer (as the harness takes it).
  const answers = first.map((text, i) =>
    followUps[i] === undefined ? text : followUpAnswers[asked.findIndex((x) => x.i === i)],
  );
  const correct = tasks.filter((task, i) => {
    const number = answers[i]?.match(/-?\d+/)?.[0];
    return number !== undefined && Number(number) === task.answer;
  }).length;
  return correct / tasks.length;
}
