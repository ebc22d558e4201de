import { expect } from 'vitest';
import { mergeRollout } from '../../src/samples/merge.js';
import { toMergeCalls } from '../../src/samples/retokenize.js';
import type { CallRecord } from '../../src/store/trace-store.js';
import type { ChatTokenizer } from '../../src/tokenizer/chat-tokenizer.js';

/**
 * A rollout's calls, each journaled ok as `endpoint`'s with the engine's prompt and completion ids
 * and a log-prob per completion token, merge into exactly one training sequence.
 */
export function expectOneTrainedSequence(
  rolloutId: string,
  calls: readonly CallRecord[],
  endpoint: string,
  tokenizer: ChatTokenizer,
): void {
  for (const call of calls) {
    expect(call).toMatchObject({ endpoint, status: 'ok' });
    expect(call.promptIds?.length).toBeGreaterThan(0);
    const [choice] = call.choices ?? [];
    expect(choice?.completionIds?.length).toBeGreaterThan(0);
    expect(choice?.logprobs).toHaveLength(choice?.completionIds?.length ?? -1);
  }
  const merged = mergeRollout(rolloutId, toMergeCalls(calls, tokenizer).calls, tokenizer);
  expect(merged.mismatches).toEqual([]);
  expect(merged.sequences).toHaveLength(1);
}
