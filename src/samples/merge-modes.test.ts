import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeBatch } from './batch-artifact.js';
import { buildBatch, type Batch, type BatchOptions, type BatchRollout } from './batch.js';
import { sampleSettings } from './config.js';
import { lossAggregationOf, MERGE_MODES, type MergeMode } from './merge-modes.js';
import type { MergeCall } from './merge.js';

/**
 * The three merge modes on generated journals. Token ids 1..500 decode one character each; every
 * completion token gets its own log-prob, so a log-prob found on the wrong token shows.
 */
const tokenizer = { decode: (t: readonly number[]) => String.fromCharCode(...t) };
const token = fc.integer({ min: 1, max: 500 });

interface Turn {
  /** The harness edits its history before this call (the first token changes). */
  rewrite: boolean;
  inserted: number[];
  /** One completion per choice (n > 1 when more); the harness continues the last. */
  completions: number[][];
}

const turn = (options: { chain?: boolean } = {}) =>
  fc.record({
    rewrite: options.chain ? fc.constant(false) : fc.boolean(),
    inserted: fc.array(token, { maxLength: 6 }),
    completions: fc.array(fc.array(token, { minLength: 1, maxLength: 6 }), {
      minLength: 1,
      maxLength: options.chain ? 1 : 2,
    }),
  });
const journal = (options: { chain?: boolean } = {}) =>
  fc.array(
    fc.record({ reward: fc.constantFrom(0, 0.5, 1), turns: fc.array(turn(options), { minLength: 1, maxLength: 5 }) }),
    {
      minLength: 1,
      maxLength: 5,
    },
  );

/** The journaled calls of a harness that plays the turns: each prompt is its context so far plus what it inserted. */
function rolloutsOf(generated: Array<{ reward: number; turns: Turn[] }>): BatchRollout[] {
  let logprob = 0;
  return generated.map(({ reward, turns }, r) => {
    let context = [7, 7, 7];
    const calls = turns.map((t, i): MergeCall => {
      if (t.rewrite && i > 0) context = [9, ...context.slice(1)];
      const promptIds = [...context, ...t.inserted];
      const choices = t.completions.map((completionIds) => ({
        completionIds,
        logprobs: completionIds.map(() => -++logprob / 1000),
        finishReason: 'stop',
      }));
      context = [...promptIds, ...(t.completions.at(-1) as number[])];
      return { callId: `r${r}-c${i}`, policyVersion: 'v1', promptIds, choices };
    });
    return { rolloutId: `r${r}`, groupId: 'task', reward, failureClass: null, calls };
  });
}

function optionsFor(
  merge: MergeMode,
  limits: { prompt: number; response: number } = { prompt: 1e6, response: 1e6 },
): BatchOptions {
  return {
    merge,
    estimator: 'dr_grpo',
    zeroVarianceGroups: 'keep',
    // What the config resolves when lossAggregation is not set.
    lossAggregation: lossAggregationOf(sampleSettings.parse({ merge })),
    maxPromptTokens: limits.prompt,
    maxResponseTokens: limits.response,
    truncated: 'mask',
    excludedFailureClasses: [],
    incompleteGroups: 'keep',
  };
}

/** Every trained stretch of the batch, by call and choice: its tokens and their old log-probs. */
function trainedSpans(batch: Batch): Map<string, Array<{ ids: number[]; logprobs: number[] }>> {
  const found = new Map<string, Array<{ ids: number[]; logprobs: number[] }>>();
  for (const s of batch.sequences)
    for (const span of s.spans) {
      const key = `${span.callId}/${span.choice}`;
      const stretch = { ids: s.ids.slice(span.start, span.end), logprobs: s.oldLogprobs.slice(span.start, span.end) };
      expect(s.lossMask.slice(span.start, span.end).every((m) => m === 1)).toBe(true);
      found.set(key, [...(found.get(key) ?? []), stretch]);
    }
  return found;
}

/** Each journaled completion is trained once, on its own tokens, with its own log-probs, and nothing else is. */
function expectEachCompletionTrainedOnce(batch: Batch, rollouts: BatchRollout[]): void {
  const spans = trainedSpans(batch);
  let completionTokens = 0;
  for (const call of rollouts.flatMap((r) => r.calls))
    call.choices.forEach((choice, i) => {
      expect(spans.get(`${call.callId}/${i}`)).toEqual([{ ids: choice.completionIds, logprobs: choice.logprobs }]);
      completionTokens += choice.completionIds?.length ?? 0;
    });
  expect(batch.report.tokens.trained).toBe(completionTokens);
}

describe('merge modes: properties', () => {
  it('stepwise trains every choice of every call exactly once, with its log-probs, after its own prompt', () => {
    fc.assert(
      fc.property(journal(), (generated) => {
        const rollouts = rolloutsOf(generated);
        const batch = buildBatch(rollouts, optionsFor('stepwise'), tokenizer);
        expectEachCompletionTrainedOnce(batch, rollouts);
        const calls = new Map(rollouts.flatMap((r) => r.calls).map((c) => [c.callId, c]));
        for (const s of batch.sequences) {
          const [span] = s.spans;
          expect(s.spans).toHaveLength(1);
          expect(s.ids.slice(0, span!.start)).toEqual(calls.get(span!.callId)!.promptIds);
          expect(s.lossMask.slice(0, span!.start).every((m) => m === 0)).toBe(true);
        }
        expect(batch.report.merge.mode).toBe('stepwise');
      }),
    );
  });

  it('exact and tito train every completion exactly once, with its log-probs, when the calls chain', () => {
    fc.assert(
      fc.property(journal({ chain: true }), fc.constantFrom<MergeMode>('exact', 'tito'), (generated, mode) => {
        const rollouts = rolloutsOf(generated);
        const batch = buildBatch(rollouts, optionsFor(mode), tokenizer);
        expectEachCompletionTrainedOnce(batch, rollouts);
        expect(batch.sequences).toHaveLength(rollouts.length);
        expect(batch.report.mergeRate).toBe(1);
      }),
    );
  });

  it('exact and tito give identical batches on the same journal', () => {
    fc.assert(
      fc.property(journal(), (generated) => {
        const rollouts = rolloutsOf(generated);
        const [exact, tito] = (['exact', 'tito'] as const).map((m) => buildBatch(rollouts, optionsFor(m), tokenizer));
        expect(tito!.sequences).toEqual(exact!.sequences);
        expect({ ...tito!.report, merge: null }).toEqual({ ...exact!.report, merge: null });
        const identity = { iteration: 1, policyVersion: 'v1', configHash: 'c' };
        expect(encodeBatch(tito!, identity).bytes.equals(encodeBatch(exact!, identity).bytes)).toBe(true);
      }),
    );
  });

  it.each(MERGE_MODES)(
    'under rollout-mean every used rollout weighs the same, whatever its number of calls (%s)',
    (mode) => {
      fc.assert(
        fc.property(journal(), (generated) => {
          const batch = buildBatch(
            rolloutsOf(generated),
            { ...optionsFor(mode), lossAggregation: 'rollout-mean' },
            tokenizer,
          );
          const total = new Map<string, number>();
          for (const s of batch.sequences)
            total.set(s.rolloutId, (total.get(s.rolloutId) ?? 0) + s.weight * s.lossMask.reduce((a, b) => a + b, 0));
          expect(total.size).toBe(batch.report.rollouts.used);
          for (const weight of total.values()) expect(weight).toBeCloseTo(1 / total.size, 9);
        }),
      );
    },
  );

  it('stepwise measures what exact merging would give, and reports the mode', () => {
    fc.assert(
      fc.property(journal(), (generated) => {
        const rollouts = rolloutsOf(generated);
        const [exact, stepwise] = (['exact', 'stepwise'] as const).map((m) =>
          buildBatch(rollouts, optionsFor(m), tokenizer),
        );
        expect(stepwise!.report.merge).toEqual({ mode: 'stepwise' });
        expect(stepwise!.report.mergeRate).toBe(exact!.report.mergeRate);
        expect(stepwise!.report.mismatchCauses).toEqual(exact!.report.mismatchCauses);
        expect(stepwise!.report.calls).toEqual(exact!.report.calls);
        expect(stepwise!.report.sequences).toBe(rollouts.flatMap((r) => r.calls.flatMap((c) => c.choices)).length);
      }),
    );
  });

  it('stepwise sequences never exceed the length limits; a cut step makes its rollout truncated', () => {
    fc.assert(
      fc.property(
        journal(),
        fc.integer({ min: 3, max: 30 }),
        fc.integer({ min: 1, max: 6 }),
        (generated, prompt, response) => {
          const rollouts = rolloutsOf(generated);
          const batch = buildBatch(rollouts, optionsFor('stepwise', { prompt, response }), tokenizer);
          for (const s of batch.sequences) {
            const promptLength = s.spans[0]!.start;
            expect(promptLength).toBeLessThanOrEqual(prompt);
            expect(s.ids.length - promptLength).toBeLessThanOrEqual(response);
          }
          const overLimit = (r: BatchRollout) =>
            r.calls.some(
              (c) => c.promptIds!.length > prompt || c.choices.some((ch) => ch.completionIds!.length > response),
            );
          expect(batch.report.truncatedRollouts).toBe(rollouts.filter(overLimit).length);
          // Truncated rollouts are masked: kept, nothing of them trained.
          for (const s of batch.sequences)
            if (overLimit(rollouts.find((r) => r.rolloutId === s.rolloutId)!)) expect(s.weight).toBe(0);
        },
      ),
    );
  });
});

describe('samples.merge in the config', () => {
  it('resolves an unset loss aggregation by the mode, and honours one that is set', () => {
    expect(sampleSettings.parse({}).merge).toBe('exact');
    expect(MERGE_MODES.map((merge) => lossAggregationOf(sampleSettings.parse({ merge })))).toEqual([
      'token-mean',
      'token-mean',
      'rollout-mean',
    ]);
    expect(lossAggregationOf(sampleSettings.parse({ merge: 'stepwise', lossAggregation: 'seq-mean-token-mean' }))).toBe(
      'seq-mean-token-mean',
    );
    expect(() => sampleSettings.parse({ merge: 'prefix' })).toThrow(/exact.*tito.*stepwise/);
  });
});
