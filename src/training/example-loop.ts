import path from 'node:path';
import { reinConfigSchema } from '../config/schema.js';
import { packageRoot } from '../package-root.js';
import { loadTaskSet } from '../rollouts/tasks.js';
import type { LocalLoopOptions } from './local-loop.js';

/**
 * The embedded default's learning setup: the example calculator agent and its verifier (separate
 * programs, run as child processes), its pinned task sets, and the base checkpoint.
 */
export function exampleLoopOptions(options: {
  workDir: string;
  iterations: number;
  tasksPerIteration: number;
  samplesPerTask: number;
  heldoutLimit?: number;
  learningRate?: number;
  epochs?: number;
  concurrency?: number;
}): LocalLoopOptions {
  const root = packageRoot();
  const example = path.join(root, 'examples', 'calculator-agent');
  const heldout = loadTaskSet(path.join(example, 'heldout.jsonl')).tasks;
  return {
    workDir: options.workDir,
    baseCheckpoint: path.join(root, 'models', 'base'),
    trainTasks: loadTaskSet(path.join(example, 'train.jsonl')).tasks,
    heldoutTasks: options.heldoutLimit === undefined ? heldout : heldout.slice(0, options.heldoutLimit),
    iterations: options.iterations,
    tasksPerIteration: options.tasksPerIteration,
    samplesPerTask: options.samplesPerTask,
    harness: { command: process.execPath, args: [path.join(example, 'harness.mjs'), '{task}', '{output}'], timeoutMs: 60_000 },
    verifier: { command: process.execPath, args: [path.join(example, 'verifier.mjs'), '{task}', '{output}'], timeoutMs: 30_000 },
    evalHarnessEnv: { AGENT_TEMPERATURE: '0' },
    hiddenFields: ['answer'],
    rewardWeights: { success: 1 },
    concurrency: options.concurrency ?? 16,
    samples: reinConfigSchema.parse({}).samples,
    trainer: {
      seed: 1,
      learningRate: options.learningRate ?? 3e-4,
      epochs: options.epochs ?? 4,
      minibatchSize: 32,
      clipEpsilon: 0.2,
      maxGradNorm: 1,
    },
  };
}
