import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCheckpoint, type Checkpoint } from '../../src/policy/checkpoint.js';
import { floatValues, readyBackend } from '../../src/policy/model.js';
import { demonstration } from '../../src/policy/warm-start.js';
import { encodeBatch } from '../../src/samples/batch-artifact.js';
import type { Batch } from '../../src/samples/batch.js';
import { decodeSafetensors, type Tensor } from '../../src/samples/safetensors.js';
import { decodeTokenLogprobs, TOKEN_LOGPROBS_FILE } from '../../src/samples/token-logprobs.js';
import { runRein } from '../helpers/cli.js';
import { setupPython, trainerEnv } from '../helpers/python.js';

/**
 * One checkpoint format, two engines: the shipped base loads in tfjs and in PyTorch transformers
 * with the same log-probs; the tfjs and PyTorch trainers make the same update from the same
 * batch (docs/training-objective.md); a LoRA adapter PyTorch trains is served by the embedded
 * policy as PEFT applies it.
 */
const root = path.resolve(import.meta.dirname, '../..');
const baseDir = path.join(root, 'models/base');
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-engines-'));
const run = promisify(execFile);
let base: Checkpoint;

beforeAll(async () => {
  await readyBackend();
  base = loadCheckpoint(baseDir);
});
afterAll(() => {
  base.model.dispose();
  rmSync(dir, { recursive: true, force: true });
});

async function trainer(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(setupPython(), ['-m', 'rein_trainer', ...args], { env: trainerEnv(), maxBuffer: 64 * 1024 * 1024 });
}

async function torchLogprobs(checkpoint: string, sequences: number[][]): Promise<number[][]> {
  const input = path.join(dir, `sequences-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(input, JSON.stringify({ sequences }));
  const { stdout } = await trainer([
    'logprobs',
    '--checkpoint',
    checkpoint,
    '--input',
    input,
    '--device',
    'cpu',
    '--dtype',
    'float32',
  ]);
  return (JSON.parse(stdout.trim().split('\n').at(-1) as string) as { logprobs: number[][] }).logprobs;
}

function tfjsLogprobs(checkpoint: Checkpoint, ids: number[]): number[] {
  return tf.tidy(() => {
    const logits = tf.logSoftmax(checkpoint.model.logits([ids.slice(0, -1)])).arraySync()[0] as number[][];
    return ids.slice(1).map((id, t) => logits[t]![id]!);
  });
}

const maxAbsDiff = (a: number[][], b: number[][]) =>
  Math.max(...a.flatMap((row, i) => row.map((v, t) => Math.abs(v - (b[i]?.[t] ?? NaN)))));

/** Multi-turn conversations as harnesses send them: tool calls, tool results, answers; one long. */
function conversations(): number[][] {
  const render = (messages: Array<Record<string, unknown>>) =>
    base.tokenizer.promptIds({ messages, tools: [{ type: 'function', function: { name: 'calc' } }] });
  const call = (id: string, x: string) => ({
    role: 'assistant',
    content: null,
    tool_calls: [{ id, type: 'function', function: { name: 'calc', arguments: JSON.stringify({ x }) } }],
  });
  const long: Array<Record<string, unknown>> = [
    { role: 'system', content: 'You are a careful calculator agent. Use the calc tool.' },
    { role: 'user', content: '37 times 78?' },
  ];
  for (let i = 0; i < 20; i++)
    long.push(call(`c${i}`, `37*${78 + i}`), { role: 'tool', tool_call_id: `c${i}`, content: String(37 * (78 + i)) });
  long.push({ role: 'assistant', content: '2886' }, { role: 'user', content: 'And 12 plus 30?' });
  return [
    render([
      { role: 'user', content: '12 plus 30?' },
      { role: 'assistant', content: '42' },
    ]),
    render([
      { role: 'user', content: '64 times 3?' },
      call('c0', '64*3'),
      { role: 'tool', tool_call_id: 'c0', content: '192' },
      { role: 'assistant', content: '192' },
    ]),
    render(long),
  ];
}

describe('one checkpoint, two engines', { timeout: 300_000 }, () => {
  it('the shipped base gives the same log-probs in tfjs and in PyTorch transformers (float32, ≤ 1e-4)', async () => {
    const sequences = conversations();
    expect(sequences[2]!.length).toBeGreaterThan(500);
    const torch = await torchLogprobs(baseDir, sequences);
    const diff = maxAbsDiff(
      sequences.map((ids) => tfjsLogprobs(base, ids)),
      torch,
    );
    expect(diff).toBeLessThanOrEqual(1e-4);
  });

  describe('the tfjs and PyTorch trainers', () => {
    let batchFile: string;
    beforeAll(() => {
      // Demonstrations of train tasks as rollouts: correct answers rewarded (+), wrong ones not (−),
      // sampler log-probs a little off the trainer's (ratio e^-0.3 ≈ 0.74 on every third token, e^0.2 ≈ 1.22 on
      // the others), corrected by masked importance sampling: the band masks the first, the cap truncates the rest.
      const tasks = [
        { id: 'a', question: '12 plus 30?', answer: 42 },
        { id: 'b', question: '64 times 3?', answer: 192 },
        { id: 'c', question: '87 minus 63?', answer: 24 },
        { id: 'd', question: '8 apples and 9 more?', answer: 17 },
      ];
      const sequences: Batch['sequences'] = tasks.flatMap((task, i) =>
        (['calculator', 'memory'] as const).map((style, j) => {
          const demo = demonstration(
            base.tokenizer,
            style === 'memory' ? { ...task, answer: task.answer + 1 } : task,
            style,
          );
          const logprobs = [0, ...tfjsLogprobs(base, demo.ids)];
          return {
            rolloutId: `r${i}-${style}`,
            ids: demo.ids,
            lossMask: demo.lossMask,
            oldLogprobs: logprobs.map((l, t) => (demo.lossMask[t] ? l + (t % 3 === 0 ? 0.3 : -0.2) : 0)),
            spans: [
              { start: 0, end: demo.ids.length, callId: 'c', choice: 0, policyVersion: 'v0', finishReason: 'stop' },
            ],
            advantage: j === 0 ? 1 : -1,
            weight: 1 / demo.lossMask.reduce((a, b) => a + b, 0) / 8,
          };
        }),
      );
      batchFile = path.join(dir, 'batch.safetensors');
      writeFileSync(
        batchFile,
        encodeBatch(
          { sequences, report: {} as Batch['report'] },
          {
            iteration: 1,
            policyVersion: 'v0',
            configHash: 'test',
            importanceSampling: { mode: 'mask', level: 'token', cap: 1.2, band: [0.8, 1.5] },
          },
        ).bytes,
      );
    });

    it('make the same update: same loss and metrics, near-equal weights (full fine-tune, same seed)', async () => {
      const settings = [
        '--batch',
        batchFile,
        '--checkpoint',
        baseDir,
        '--lr',
        '0.001',
        '--epochs',
        '2',
        '--minibatch',
        '3',
        '--seed',
        '5',
        '--clip',
        '0.2',
        '--max-grad-norm',
        '1',
      ];
      const [tfjs, torch] = await Promise.all([
        runRein(['policy', 'train', ...settings, '--out', path.join(dir, 'tfjs')]),
        trainer(['train', ...settings, '--out', path.join(dir, 'torch'), '--device', 'cpu', '--dtype', 'float32']),
      ]);
      expect(tfjs.code, tfjs.stderr).toBe(0);
      const a = JSON.parse(tfjs.stdout.trim().split('\n').at(-1) as string);
      const b = JSON.parse(torch.stdout.trim().split('\n').at(-1) as string);
      expect(b).toMatchObject({
        steps: a.steps,
        skippedMinibatches: a.skippedMinibatches,
        batchContentHash: a.batchContentHash,
        reused: false,
      });
      expect(a.steps).toBe(6);
      for (const key of ['loss', 'clipFraction', 'approxKl', 'entropy', 'gradNorm'] as const)
        expect(b.metrics[key], key).toBeCloseTo(a.metrics[key], 4);
      expect(b.metrics.tokens).toBe(a.metrics.tokens);
      expect(a.metrics.clipFraction).toBeGreaterThan(0);
      // One correction: the same tokens masked and capped, the same ratios.
      const [ia, ib] = [a.importanceWeights, b.importanceWeights];
      expect(ia.maskedFraction).toBeGreaterThan(0.2);
      expect(ia.cappedFraction).toBeGreaterThan(0.4);
      for (const key of ['maskedFraction', 'cappedFraction', 'tokens'] as const) expect(ib[key], key).toBe(ia[key]);
      for (const key of ['mean', 'min', 'max'] as const) {
        expect(ib.ratio[key], `ratio.${key}`).toBeCloseTo(ia.ratio[key], 4);
        expect(ib.sequences.ratio[key], `sequences.ratio.${key}`).toBeCloseTo(ia.sequences.ratio[key], 4);
      }
      // Each step's own metrics, the same in both, and means of them that are the reported ones.
      expect(a.stepMetrics.map((s: { epoch: number }) => s.epoch)).toEqual([0, 0, 0, 1, 1, 1]);
      expect(b.stepMetrics.map((s: { epoch: number }) => s.epoch)).toEqual([0, 0, 0, 1, 1, 1]);
      a.stepMetrics.forEach((step: Record<string, number>, i: number) => {
        for (const key of ['loss', 'approxKl', 'gradNorm', 'tokens'] as const)
          expect(b.stepMetrics[i][key], `step ${i} ${key}`).toBeCloseTo(step[key]!, 3);
      });
      const meanLoss = a.stepMetrics.reduce((n: number, s: { loss: number }) => n + s.loss, 0) / a.steps;
      expect(meanLoss).toBeCloseTo(a.metrics.loss, 6);
      // The parent's log-probs per token, as each trainer computed them: the same values, the same gap to the sampler.
      const trainerValues = (folder: string) =>
        decodeTokenLogprobs(readFileSync(path.join(folder, TOKEN_LOGPROBS_FILE))).values;
      const [la, lb] = [trainerValues(path.join(dir, 'tfjs')), trainerValues(path.join(dir, 'torch'))];
      expect(lb.length).toBe(la.length);
      expect(Math.max(...la.map((v, i) => Math.abs(v - lb[i]!)))).toBeLessThan(1e-4);
      expect(la.some((v) => v < 0)).toBe(true);
      expect(b.trainerLogprobs.tokens).toBe(a.trainerLogprobs.tokens);
      expect(b.trainerLogprobs.meanAbsDiff).toBeCloseTo(a.trainerLogprobs.meanAbsDiff, 4);
      expect(a.trainerLogprobs.meanAbsDiff).toBeGreaterThan(0.1); // the batch's sampler was shifted on purpose

      const weights = (folder: string) =>
        decodeSafetensors(readFileSync(path.join(folder, 'model.safetensors'))).tensors;
      const [wa, wb, w0] = [weights(path.join(dir, 'tfjs')), weights(path.join(dir, 'torch')), weights(baseDir)];
      let moved = 0;
      let apart = 0;
      for (const [name, t] of Object.entries(w0)) {
        const [x, y, x0] = [floatValues(wa[name] as Tensor), floatValues(wb[name] as Tensor), floatValues(t)];
        x.forEach((v, i) => {
          moved = Math.max(moved, Math.abs(v - x0[i]!));
          apart = Math.max(apart, Math.abs(v - y[i]!));
        });
      }
      expect(moved).toBeGreaterThan(1e-3); // the update did something
      expect(apart).toBeLessThan(moved / 20);
    });

    it('a LoRA adapter trained by PyTorch is served by the embedded policy with the log-probs PEFT gives', async () => {
      const out = path.join(dir, 'lora');
      const { stdout } = await trainer([
        'train',
        '--checkpoint',
        baseDir,
        '--batch',
        batchFile,
        '--out',
        out,
        '--lr',
        '0.01',
        '--lora-rank',
        '4',
        '--lora-alpha',
        '8',
        '--lora-target-modules',
        'q_proj,v_proj,gate_proj',
        '--device',
        'cpu',
      ]);
      expect(JSON.parse(stdout.trim().split('\n').at(-1) as string)).toMatchObject({
        format: 'lora',
        base: baseDir,
        reused: false,
      });
      const adapter = loadCheckpoint(out);
      expect(adapter.adapter).toMatchObject({ base: baseDir, rank: 4, alpha: 8 });
      const sequences = conversations();
      const torch = await torchLogprobs(out, sequences);
      const ours = sequences.map((ids) => tfjsLogprobs(adapter, ids));
      expect(maxAbsDiff(ours, torch)).toBeLessThanOrEqual(1e-4);
      // And it is not the base: the adapter changed the policy.
      expect(
        maxAbsDiff(
          ours,
          sequences.map((ids) => tfjsLogprobs(base, ids)),
        ),
      ).toBeGreaterThan(1e-3);
      adapter.model.dispose();
    });
  });
});
