/**
 * Sample building speed: merge + advantages + loss weights over synthetic 100-turn rollouts, on
 * one core (this process), in output tokens per second; the batch encoding is timed apart. The
 * baseline, measured in the same run, is one pass copying every journaled prompt id into a
 * typed array: the least any stage that reads the calls must do.
 *
 *   npm run bench:samples [-- --quick]
 */
import os from 'node:os';
import { encodeBatch } from '../src/samples/batch-artifact.js';
import { buildBatch, type BatchOptions, type BatchRollout } from '../src/samples/batch.js';
import type { MergeCall } from '../src/samples/merge.js';

const quick = process.argv.includes('--quick');
const ROLLOUTS = quick ? 16 : 64;
const TURNS = 100;

function rollout(index: number): BatchRollout {
  let seed = index + 1;
  const token = () => (seed = (seed * 1103515245 + 12345) % 2147483648) % 150_000;
  let context = Array.from({ length: 300 }, token);
  const calls: MergeCall[] = [];
  for (let t = 0; t < TURNS; t++) {
    const completion = Array.from({ length: 40 }, token);
    // As the journal reports it: each prompt extends the previous call's prompt + completion.
    const extendsCall = t === 0 ? null : { ref: `r${index}-c${t - 1}`, prefixLength: context.length - 30 };
    calls.push({
      callId: `r${index}-c${t}`,
      policyVersion: 'v1',
      promptIds: context,
      extends: extendsCall,
      choices: [{ completionIds: completion, logprobs: completion.map(() => -0.5), finishReason: 'stop' }],
    });
    context = [...context, ...completion, ...Array.from({ length: 30 }, token)];
  }
  return {
    rolloutId: `r${index}`,
    groupId: `task-${index % (ROLLOUTS / 8)}`,
    reward: index % 3 === 0 ? 1 : 0,
    failureClass: null,
    calls,
  };
}

const options: BatchOptions = {
  estimator: 'grpo',
  zeroVarianceGroups: 'keep',
  lossAggregation: 'rollout-mean',
  maxPromptTokens: 1_000_000,
  maxResponseTokens: 1_000_000,
  truncated: 'mask',
  excludedFailureClasses: ['infrastructure'],
  incompleteGroups: 'keep',
};
const tokenizer = { decode: (ids: readonly number[]) => ids.join(' ') };

const rollouts = Array.from({ length: ROLLOUTS }, (_, i) => rollout(i));
const journaledIds = rollouts.reduce((n, r) => n + r.calls.reduce((m, c) => m + (c.promptIds?.length ?? 0) + 40, 0), 0);

function time<T>(fn: () => T, repeats: number): { result: T; seconds: number } {
  let result = fn();
  const t0 = performance.now();
  for (let i = 0; i < repeats; i++) result = fn();
  return { result, seconds: (performance.now() - t0) / 1000 / repeats };
}

const baseline = time(() => {
  const out = new Int32Array(journaledIds);
  let at = 0;
  for (const r of rollouts) for (const c of r.calls) for (const id of c.promptIds ?? []) out[at++] = id;
  return out;
}, 3);
const build = time(() => buildBatch(rollouts, options, tokenizer), 3);
const tokens = build.result.report.tokens.total;
const encode = time(() => encodeBatch(build.result, { iteration: 1, policyVersion: 'v1', configHash: 'bench' }), 3);

const mtps = (n: number, s: number) => (n / s / 1e6).toFixed(2);
console.log(
  `Samples benchmark, ${ROLLOUTS} rollouts × ${TURNS} turns, ${tokens.toLocaleString()} batch tokens from ${journaledIds.toLocaleString()} journaled ids; one core of ${os.cpus().length}.\n`,
);
console.log('| step | seconds | batch tokens/s (M) | vs baseline |');
console.log('|---|---|---|---|');
console.log(
  `| baseline: copy every journaled id once | ${baseline.seconds.toFixed(3)} | ${mtps(tokens, baseline.seconds)} | 1.00 |`,
);
console.log(
  `| merge + advantages + weights (buildBatch) | ${build.seconds.toFixed(3)} | ${mtps(tokens, build.seconds)} | ${(baseline.seconds / build.seconds).toFixed(2)} |`,
);
console.log(
  `| encode the safetensors artifact | ${encode.seconds.toFixed(3)} | ${mtps(tokens, encode.seconds)} | ${(baseline.seconds / encode.seconds).toFixed(2)} |`,
);
