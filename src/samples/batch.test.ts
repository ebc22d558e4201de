import { describe, expect, it } from 'vitest';
import { decodeBatch, encodeBatch } from './batch-artifact.js';
import { buildBatch, type BatchOptions, type BatchRollout } from './batch.js';
import { qwen3 } from '../../test/helpers/qwen3.js';
import type { MergeCall } from './merge.js';

const ids = (text: string) => [...text].map((c) => c.charCodeAt(0));
const tokenizer = { decode: (t: readonly number[]) => String.fromCharCode(...t) };

function call(
  callId: string,
  prompt: string,
  completion: string,
  finishReason = 'stop',
  policyVersion = 'v2',
): MergeCall {
  return {
    callId,
    policyVersion,
    promptIds: ids(prompt),
    choices: [{ completionIds: ids(completion), logprobs: ids(completion).map(() => -0.25), finishReason }],
  };
}

function rollout(
  rolloutId: string,
  groupId: string,
  reward: number | null,
  calls: MergeCall[],
  failureClass: string | null = null,
): BatchRollout {
  return { rolloutId, groupId, reward, failureClass, calls };
}

const options: BatchOptions = {
  estimator: 'dr_grpo',
  zeroVarianceGroups: 'drop',
  lossAggregation: 'rollout-mean',
  maxPromptTokens: 100,
  maxResponseTokens: 100,
  truncated: 'mask',
  excludedFailureClasses: ['infrastructure', 'orchestrator', 'verifier'],
  incompleteGroups: 'keep',
};

/**
 * Task t1: a two-turn success (one merged sequence), a failure, and a rollout whose history was rewritten (two
 * sequences).
 */
const hand: BatchRollout[] = [
  rollout('ok', 't1', 1, [call('a1', 'U:q|A:', 'tool'), call('a2', 'U:q|A:tool|T:4|A:', 'four')]),
  rollout('wrong', 't1', 0, [call('b1', 'U:q|A:', 'five')]),
  rollout('rewritten', 't1', 0, [call('c1', 'U:q|A:', 'hmm'), call('c2', 'U:q|T:summary|A:', 'six')]),
  rollout('crashed-infra', 't1', null, [call('d1', 'U:q|A:', 'x')], 'infrastructure'),
  rollout('cut', 't2', 1, [call('e1', 'U:long|A:', 'abc', 'length')]),
  rollout('t2-other', 't2', 0, [call('f1', 'U:long|A:', 'no')]),
];

describe('buildBatch on hand-built rollouts', () => {
  const batch = buildBatch(hand, options, tokenizer);

  it('keeps the right rollouts and says why the others are out', () => {
    expect(batch.report.rollouts).toMatchObject({
      total: 6,
      used: 4,
      excluded: { excluded_failure_class: 1, zero_variance_group: 1 },
      excludedIds: { excluded_failure_class: ['crashed-infra'], zero_variance_group: ['t2-other'] },
    });
    expect(batch.report.truncatedRollouts).toBe(1);
    expect(batch.report.mismatchCauses).toEqual({ harness_rewrote_history: 1 });
    expect(batch.report.mismatchRolloutIds).toEqual({ harness_rewrote_history: ['rewritten'] });
    expect(batch.report.mergeRate).toBe(0.5);
  });

  it('computes ids, masks, advantages and weights exactly', () => {
    const byRollout = (id: string) => batch.sequences.filter((s) => s.rolloutId === id);
    const [ok] = byRollout('ok');
    expect(ok!.ids).toEqual(ids('U:q|A:tool|T:4|A:four'));
    expect(ok!.lossMask).toEqual([0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]);
    expect(ok!.oldLogprobs.filter((_, i) => ok!.lossMask[i])).toEqual(Array(8).fill(-0.25));
    // Dr. GRPO over t1's kept rewards [1, 0, 0]: mean 1/3.
    expect(ok!.advantage).toBeCloseTo(2 / 3, 12);
    expect(byRollout('wrong')[0]!.advantage).toBeCloseTo(-1 / 3, 12);
    expect(byRollout('rewritten').map((s) => s.advantage)).toEqual([
      expect.closeTo(-1 / 3, 12),
      expect.closeTo(-1 / 3, 12),
    ]);
    // rollout-mean over 3 trained rollouts (the truncated one is masked): each weighs 1/3 in all.
    expect(ok!.weight * 8).toBeCloseTo(1 / 3, 12);
    const rewritten = byRollout('rewritten');
    expect(rewritten.map((s) => s.lossMask.reduce((a, b) => a + b, 0))).toEqual([3, 3]);
    expect(rewritten[0]!.weight * 3 + rewritten[1]!.weight * 3).toBeCloseTo(1 / 3, 12);
  });

  it('masks a truncated rollout entirely (no outcome reward) but keeps its tokens', () => {
    const [cut] = batch.sequences.filter((s) => s.rolloutId === 'cut');
    expect(cut!.lossMask.every((m) => m === 0)).toBe(true);
    expect(cut!.advantage).toBe(0);
    expect(cut!.weight).toBe(0);
  });

  it('drops or zero-rewards truncated rollouts when configured', () => {
    expect(
      buildBatch(hand, { ...options, truncated: 'drop' }, tokenizer).report.rollouts.excludedIds.truncated,
    ).toEqual(['cut']);
    const zero = buildBatch(hand, { ...options, truncated: 'zero_reward' }, tokenizer);
    // t2 is now [0 (cut, zero reward), 0]: no variance, both dropped.
    expect(zero.report.rollouts.excludedIds.zero_variance_group).toEqual(['cut', 't2-other']);
  });

  it('trains on model and harness failures with their reward, and leaves out infrastructure ones', () => {
    const failures = buildBatch(
      [
        rollout('harness-crash', 'g', 0, [call('x', 'U:q|A:', 'bad')], 'harness'),
        rollout('model-malformed', 'g', 0, [call('y', 'U:q|A:', '{{')], 'model'),
        rollout('fine', 'g', 1, [call('z', 'U:q|A:', 'ok')]),
        rollout('gateway-down', 'g', null, [], 'infrastructure'),
      ],
      options,
      tokenizer,
    );
    expect(failures.sequences.map((s) => [s.rolloutId, s.advantage])).toEqual([
      ['harness-crash', expect.closeTo(-1 / 3, 12)],
      ['model-malformed', expect.closeTo(-1 / 3, 12)],
      ['fine', expect.closeTo(2 / 3, 12)],
    ]);
    expect(failures.report.rollouts.excludedIds).toEqual({ excluded_failure_class: ['gateway-down'] });
  });

  it('drops a whole group when one of its rollouts was left out, if asked', () => {
    const strict = buildBatch(hand, { ...options, incompleteGroups: 'drop' }, tokenizer);
    expect(strict.report.rollouts.excludedIds.incomplete_group).toEqual(['ok', 'wrong', 'rewritten']);
  });

  it('cuts sequences at the response limit and counts the rollout as truncated', () => {
    const short = buildBatch(
      [rollout('a', 'g', 1, [call('x', 'U:q|A:', 'a long reply')]), rollout('b', 'g', 0, [call('y', 'U:q|A:', 'no')])],
      { ...options, maxResponseTokens: 4, truncated: 'zero_reward', zeroVarianceGroups: 'keep' },
      tokenizer,
    );
    expect(short.report.truncatedRollouts).toBe(1);
    expect(short.sequences.find((s) => s.rolloutId === 'a')?.ids).toEqual(ids('U:q|A:a lo'));
  });

  it('leaves out rollouts sampled from a policy too many versions old', () => {
    const stale = buildBatch(
      [
        rollout('old', 'g', 1, [call('x', 'U:q|A:', 'a', 'stop', 'v0')]),
        rollout('new', 'g', 0, [call('y', 'U:q|A:', 'b', 'stop', 'v2')]),
      ],
      { ...options, zeroVarianceGroups: 'keep', staleness: { lineage: ['v0', 'v1', 'v2'], maxVersionsBehind: 1 } },
      tokenizer,
    );
    expect(stale.report.rollouts.excludedIds.stale_policy).toEqual(['old']);
    expect(stale.report.staleness).toEqual({ maxVersionsBehind: 1, keptByVersionsBehind: { '0': 1 } });
  });

  it("counts the kept rollouts by versions behind, a rollout's oldest call deciding", () => {
    const lineage = ['v0', 'v1', 'v2'];
    const rollouts = [
      rollout('now', 'g', 1, [call('a', 'U:q|A:', 'a', 'stop', 'v2')]),
      rollout('mixed', 'g', 0, [call('b', 'U:q|A:', 'b', 'stop', 'v1'), call('c', 'U:q|A:b|T:x|A:', 'c')]),
      rollout('older', 'g', 1, [call('d', 'U:q|A:', 'd', 'stop', 'v0')]),
      rollout('elsewhere', 'g', 0, [call('e', 'U:q|A:', 'e', 'stop', 'other')]),
    ];
    const unbounded = buildBatch(rollouts, { ...options, staleness: { lineage } }, tokenizer).report;
    expect(unbounded.rollouts.used).toBe(4);
    expect(unbounded.staleness).toEqual({
      maxVersionsBehind: null,
      keptByVersionsBehind: { '0': 1, '1': 1, '2': 1, unknown: 1 },
    });
    const bounded = buildBatch(rollouts, { ...options, staleness: { lineage, maxVersionsBehind: 1 } }, tokenizer);
    expect(bounded.report.rollouts.excluded).toEqual({ stale_policy: 2 });
    expect(bounded.report.staleness?.keptByVersionsBehind).toEqual({ '0': 1, '1': 1 });
    expect(buildBatch(rollouts, options, tokenizer).report.staleness).toBeNull();
  });
});

describe('the data-quality report', () => {
  it('counts a break at a lossy decode as lossy_decode, not as the harness rewriting its history', () => {
    const question = { model: 'q', messages: [{ role: 'user', content: 'Draw a glyph' }] };
    const end = qwen3.encode('<|im_end|>');
    // The first two of the glyph's three byte-level tokens: not valid UTF-8 alone, decoded to U+FFFD.
    const lossy = [...qwen3.encode('Sure '), ...qwen3.encode('𓀀').slice(0, 2), ...qwen3.encode(' ok')];
    const sentBack = [
      ...question.messages,
      { role: 'assistant', content: 'Sure \uFFFD\uFFFD ok' },
      { role: 'user', content: 'more' },
    ];
    const calls: MergeCall[] = [
      { promptIds: qwen3.promptIds(question), completionIds: [...lossy, ...end] },
      { promptIds: qwen3.promptIds({ ...question, messages: sentBack }), completionIds: end },
    ].map((c, i) => ({
      callId: `c${i}`,
      policyVersion: 'v2',
      promptIds: c.promptIds,
      choices: [{ completionIds: c.completionIds, logprobs: c.completionIds.map(() => -0.5), finishReason: 'stop' }],
    }));
    const batch = buildBatch([rollout('lossy', 't', 1, calls), rollout('other', 't', 0, calls)], options, qwen3);
    expect(batch.report.mismatchCauses).toEqual({ lossy_decode: 2 });
  });
});

describe('the batch artifact', () => {
  it('reads back exactly what was written, with its identity', () => {
    const batch = buildBatch(hand, options, tokenizer);
    const { bytes, contentHash } = encodeBatch(batch, {
      iteration: 3,
      policyVersion: 'v2',
      configHash: 'cfg-1',
      importanceWeightCap: 2,
    });
    const decoded = decodeBatch(bytes);
    expect(decoded.metadata).toMatchObject({
      iteration: '3',
      policy_version: 'v2',
      config_hash: 'cfg-1',
      content_hash: contentHash,
      format: 'rein-batch/1',
      importance_weight_cap: '2',
      policy_versions: '["v2"]',
    });
    expect(decoded.sequences).toHaveLength(batch.sequences.length);
    decoded.sequences.forEach((s, i) => {
      const original = batch.sequences[i]!;
      expect(s.rolloutId).toBe(original.rolloutId);
      expect(s.ids).toEqual(original.ids);
      expect(s.lossMask).toEqual(original.lossMask);
      expect(s.oldLogprobs).toEqual(original.oldLogprobs.map(Math.fround));
      expect(s.advantages).toEqual(original.ids.map(() => Math.fround(original.advantage)));
      expect(s.lossWeights).toEqual(original.lossMask.map((m) => (m ? Math.fround(original.weight) : 0)));
      expect(s.policyVersions).toEqual(original.lossMask.map((m) => (m ? 'v2' : null)));
    });
  });

  it('records which policy version sampled each trained token', () => {
    const mixed = buildBatch(
      [
        rollout('m', 'g', 1, [
          call('x', 'U:q|A:', 'ab', 'stop', 'v1'),
          call('y', 'U:q|A:ab|T:c|A:', 'de', 'stop', 'v2'),
        ]),
        rollout('n', 'g', 0, [call('z', 'U:q|A:', 'no', 'stop', 'v2')]),
      ],
      options,
      tokenizer,
    );
    const decoded = decodeBatch(encodeBatch(mixed, { iteration: 1, policyVersion: 'v2', configHash: 'c' }).bytes);
    const trained = decoded.sequences[0]!.policyVersions.filter((p) => p !== null);
    expect(trained).toEqual(['v1', 'v1', 'v2', 'v2']);
  });

  it('refuses an artifact whose tensors were altered', () => {
    const { bytes } = encodeBatch(buildBatch(hand, options, tokenizer), {
      iteration: 1,
      policyVersion: 'v2',
      configHash: 'c',
    });
    const tampered = Buffer.from(bytes);
    tampered.writeUInt8(tampered.readUInt8(tampered.length - 1) ^ 0xff, tampered.length - 1);
    expect(() => decodeBatch(tampered)).toThrow(/content hash does not match/);
  });
});
