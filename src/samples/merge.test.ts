import { describe, expect, it } from 'vitest';
import { qwen3 } from '../../test/helpers/qwen3.js';
import { mergeRollout, type MergeCall } from './merge.js';

/**
 * Golden tests on hand-built rollouts. Toy tokenizer: one token per character, id = char code;
 * ids from 1000 up decode to the same characters as id − 1000 (a second spelling of the same
 * text, for retokenization drift).
 */
const ids = (text: string) => [...text].map((c) => c.charCodeAt(0));
const tokenizer = {
  decode: (tokens: readonly number[]) => String.fromCharCode(...tokens.map((t) => (t >= 1000 ? t - 1000 : t))),
};
const logprobsOf = (text: string) => [...text].map((_, i) => -(i + 1) / 100);

function call(
  callId: string,
  prompt: string,
  completion: string,
  options: Partial<MergeCall> & { finishReason?: string } = {},
): MergeCall {
  return {
    callId,
    policyVersion: 'v1',
    promptIds: ids(prompt),
    choices: [
      {
        completionIds: ids(completion),
        logprobs: logprobsOf(completion),
        finishReason: options.finishReason ?? 'stop',
      },
    ],
    ...options,
  };
}

/** Renders a sequence as text with trained tokens in [brackets], to check masks at a glance. */
function show(sequence: { ids: number[]; lossMask: number[] }): string {
  let out = '';
  sequence.ids.forEach((id, i) => {
    const open = sequence.lossMask[i] === 1 && sequence.lossMask[i - 1] !== 1;
    const close = sequence.lossMask[i] === 1 && sequence.lossMask[i + 1] !== 1;
    out += `${open ? '[' : ''}${tokenizer.decode([id])}${close ? ']' : ''}`;
  });
  return out;
}

describe('mergeRollout', () => {
  it('merges a multi-turn rollout into one sequence, masking what the harness inserted', () => {
    const turn1 = 'S:solve 6*7|A:';
    const reply1 = 'calc(6*7)';
    const turn2 = `${turn1}${reply1}|T:42|A:`;
    const reply2 = 'answer 42';
    const result = mergeRollout('r1', [call('c1', turn1, reply1), call('c2', turn2, reply2)], tokenizer);

    expect(result.mergedCalls).toBe(1);
    expect(result.mismatches).toEqual([]);
    expect(result.sequences).toHaveLength(1);
    const [sequence] = result.sequences;
    expect(show(sequence!)).toBe('S:solve 6*7|A:[calc(6*7)]|T:42|A:[answer 42]');
    expect(sequence!.spans).toEqual([
      {
        callId: 'c1',
        choice: 0,
        start: turn1.length,
        end: turn1.length + reply1.length,
        policyVersion: 'v1',
        finishReason: 'stop',
      },
      {
        callId: 'c2',
        choice: 0,
        start: turn2.length,
        end: turn2.length + reply2.length,
        policyVersion: 'v1',
        finishReason: 'stop',
      },
    ]);
    // Old log-probs sit exactly on the trained tokens.
    expect(sequence!.oldLogprobs.slice(turn1.length, turn1.length + reply1.length)).toEqual(logprobsOf(reply1));
    expect(sequence!.oldLogprobs.slice(turn1.length + reply1.length, turn2.length)).toEqual(
      Array(turn2.length - turn1.length - reply1.length).fill(0),
    );
    expect(sequence!.oldLogprobs.slice(0, turn1.length).every((l) => l === 0)).toBe(true);
  });

  it('starts a new sequence when the template stripped the thinking block, and says so', () => {
    const turn1 = 'U:hi|A:';
    const reply1 = '<think>plan it</think>hello';
    const turn2 = `${turn1}hello|U:more|A:`;
    const result = mergeRollout('r1', [call('c1', turn1, reply1), call('c2', turn2, 'ok')], tokenizer);
    expect(result.sequences.map(show)).toEqual(['U:hi|A:[<think>plan it</think>hello]', 'U:hi|A:hello|U:more|A:[ok]']);
    expect(result.mismatches).toEqual([
      { callId: 'c2', cause: 'chat_template_rewrote_history', divergesAt: turn1.length },
    ]);
  });

  it('names retokenization drift: the same text under other ids', () => {
    const turn1 = 'U:go|A:';
    const turn2 = [...ids(turn1), ...ids('done').map((i) => i + 1000), ...ids('|U:next|A:')];
    const result = mergeRollout(
      'r1',
      [call('c1', turn1, 'done'), { ...call('c2', '', 'fine'), promptIds: turn2 }],
      tokenizer,
    );
    expect(result.mismatches).toEqual([{ callId: 'c2', cause: 'retokenization_drift', divergesAt: turn1.length }]);
    expect(result.sequences).toHaveLength(2);
  });

  it('names a history the harness cut short, a new conversation, and a policy change', () => {
    const result = mergeRollout(
      'r1',
      [
        call('c1', 'S:system prompt|U:first question|A:', 'first answer'),
        call('c2', 'S:system prompt|U:second question|A:', 'second answer'),
        call('c3', 'X:a sub-agent with its own context|A:', 'sub answer'),
        call('c4', 'X:a sub-agent with its own context|A:different', 'x', { policyVersion: 'v2' }),
      ],
      tokenizer,
    );
    expect(result.mismatches.map((m) => [m.callId, m.cause])).toEqual([
      ['c2', 'harness_rewrote_history'],
      ['c3', 'new_conversation'],
      ['c4', 'policy_version_changed'],
    ]);
    expect(result.sequences).toHaveLength(4);
  });

  it('keeps every choice of n > 1 and continues the branch the harness picked', () => {
    const turn1 = 'U:pick|A:';
    const first: MergeCall = {
      callId: 'c1',
      policyVersion: 'v1',
      promptIds: ids(turn1),
      choices: [
        { completionIds: ids('left'), logprobs: logprobsOf('left'), finishReason: 'stop' },
        { completionIds: ids('right'), logprobs: logprobsOf('right'), finishReason: 'stop' },
      ],
    };
    const result = mergeRollout('r1', [first, call('c2', `${turn1}right|T:ok|A:`, 'end')], tokenizer);
    expect(result.sequences.map(show)).toEqual(['U:pick|A:[left]', 'U:pick|A:[right]|T:ok|A:[end]']);
    expect(result.mismatches).toEqual([]);
  });

  it('marks truncated completions on their span and skips calls without token ids', () => {
    const result = mergeRollout(
      'r1',
      [
        call('c1', 'U:long|A:', 'cut of', { finishReason: 'length' }),
        { ...call('c2', 'U:x|A:', 'y'), promptIds: null },
      ],
      tokenizer,
    );
    expect(result.sequences[0]?.spans[0]?.finishReason).toBe('length');
    expect(result.skippedCalls).toEqual(['c2']);
  });

  it('counts trained completions that came without log-probs', () => {
    const noLogprobs: MergeCall = {
      callId: 'c1',
      policyVersion: 'v1',
      promptIds: ids('U:a|A:'),
      choices: [{ completionIds: ids('b'), logprobs: null, finishReason: 'stop' }],
    };
    const result = mergeRollout('r1', [noLogprobs], tokenizer);
    expect(result.missingLogprobs).toBe(1);
    expect(result.sequences[0]?.oldLogprobs).toEqual([0, 0, 0, 0, 0, 0, 0]);
  });
});

describe('mergeRollout: a completion the backend decoded lossily (real Qwen3 tokenizer)', () => {
  const question = { model: 'q', messages: [{ role: 'user', content: 'Draw a glyph' }] };
  const end = qwen3.encode('<|im_end|>');
  // '𓀀' is three byte-level tokens; the first two alone are not valid UTF-8 and decode to U+FFFD.
  const glyph = qwen3.encode('𓀀');
  const lossy = [...qwen3.encode('Sure '), ...glyph.slice(0, 2), ...qwen3.encode(' ok')];
  const first: MergeCall = {
    callId: 'c1',
    policyVersion: 'v1',
    promptIds: qwen3.promptIds(question),
    choices: [{ completionIds: [...lossy, ...end], logprobs: null, finishReason: 'stop' }],
  };
  /** The next call, with the assistant turn as the harness sent it back. */
  const next = (sentBack: string): MergeCall => ({
    callId: 'c2',
    policyVersion: 'v1',
    promptIds: qwen3.promptIds({
      ...question,
      messages: [...question.messages, { role: 'assistant', content: sentBack }, { role: 'user', content: 'more' }],
    }),
    choices: [{ completionIds: end, logprobs: null, finishReason: 'stop' }],
  });

  it('names the break lossy_decode, not the harness, whatever the backend made of the bytes', () => {
    expect(qwen3.decode(lossy)).toBe('Sure \uFFFD ok');
    // The text as the backend decoded it, sent back unchanged: same text, other ids.
    // One U+FFFD per token (an incremental detokenizer), or the bytes dropped at the end of a reply.
    for (const sentBack of ['Sure \uFFFD ok', 'Sure \uFFFD\uFFFD ok', 'Sure  ok']) {
      const result = mergeRollout('r', [first, next(sentBack)], qwen3);
      expect(
        result.mismatches.map((m) => m.cause),
        sentBack,
      ).toEqual(['lossy_decode']);
      const completionStart = first.promptIds!.length;
      expect(result.mismatches[0]!.divergesAt).toBeGreaterThanOrEqual(completionStart);
      expect(result.mismatches[0]!.divergesAt).toBeLessThanOrEqual(completionStart + qwen3.encode('Sure ').length);
    }
  });

  it('still blames the harness when it changed the text before the lossy bytes', () => {
    const result = mergeRollout('r', [first, next('Fine, sure \uFFFD ok')], qwen3);
    expect(result.mismatches.map((m) => m.cause)).toEqual(['harness_rewrote_history']);
  });
});

describe('mergeRollout: what the journal already knows', () => {
  it('trusts the journal when it says a prompt extends the previous call, and only then', () => {
    const turn1 = 'U:q|A:';
    const c1 = call('c1', turn1, 'ans');
    const c2 = call('c2', `${turn1}ans|T:x|A:`, 'end');
    const claimed = mergeRollout(
      'r',
      [c1, { ...c2, extends: { ref: 'c1', prefixLength: (turn1 + 'ans').length } }],
      tokenizer,
    );
    expect(claimed.sequences.map(show)).toEqual(['U:q|A:[ans]|T:x|A:[end]']);
    // A claim about another call, or a shorter shared prefix, falls back to comparing the ids.
    const wrongRef = mergeRollout('r', [c1, { ...c2, extends: { ref: 'c0', prefixLength: 99 } }], tokenizer);
    expect(wrongRef.sequences.map(show)).toEqual(['U:q|A:[ans]|T:x|A:[end]']);
    const diverged = call('c2', 'U:other|A:', 'z');
    const shortClaim = mergeRollout('r', [c1, { ...diverged, extends: { ref: 'c1', prefixLength: 2 } }], tokenizer);
    expect(shortClaim.sequences).toHaveLength(2);
  });
});

describe('mergeRollout: properties', () => {
  it('merges any rollout whose prompts extend each other into one sequence that trains exactly the completions', async () => {
    const fc = (await import('fast-check')).default;
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            inserted: fc.array(fc.integer({ min: 1, max: 500 }), { maxLength: 20 }),
            completion: fc.array(fc.integer({ min: 1, max: 500 }), { minLength: 1, maxLength: 20 }),
          }),
          { minLength: 1, maxLength: 15 },
        ),
        (turns) => {
          let context: number[] = [7, 7, 7];
          const calls: MergeCall[] = turns.map((turn, i) => {
            context = [...context, ...turn.inserted];
            const call: MergeCall = {
              callId: `c${i}`,
              policyVersion: 'v1',
              promptIds: context,
              choices: [
                { completionIds: turn.completion, logprobs: turn.completion.map(() => -0.5), finishReason: 'stop' },
              ],
            };
            context = [...context, ...turn.completion];
            return call;
          });
          const result = mergeRollout('r', calls, tokenizer);
          expect(result.sequences).toHaveLength(1);
          expect(result.mergedCalls).toBe(turns.length - 1);
          const [sequence] = result.sequences;
          expect(sequence!.ids).toEqual(context);
          expect(sequence!.lossMask.reduce((a, b) => a + b, 0)).toBe(
            turns.reduce((n, t) => n + t.completion.length, 0),
          );
          expect(sequence!.oldLogprobs.filter((l, i) => sequence!.lossMask[i] === 1).every((l) => l === -0.5)).toBe(
            true,
          );
        },
      ),
    );
  });
});
