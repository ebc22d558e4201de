import { describe, expect, it } from 'vitest';
import { qwen3 } from '../../../test/helpers/qwen3.js';
import { mergeRollout, type MergeCall } from '../../samples/merge.js';
import type { ChatRequest } from '../../tokenizer/chat-tokenizer.js';
import { splicedPrompt, type EarlierCall } from './splice.js';

/**
 * Token in with the real Qwen3 tokenizer and chat template, on the three ways frameworks break
 * exact merging (issue 30): LangChain re-serialising tool-call arguments, a thinking model whose
 * template drops earlier reasoning, and smolagents sending text as content-part arrays.
 */
const tools = [
  {
    type: 'function',
    function: {
      name: 'calc',
      description: 'Evaluates arithmetic',
      parameters: { type: 'object', properties: { x: { type: 'string' } }, required: ['x'] },
    },
  },
];
const CALL_TEXT =
  '<think>\nI should use the calculator.\n</think>\n\n' +
  '<tool_call>\n{"name": "calc", "arguments": {"x": "6*7", "exact": true}}\n</tool_call><|im_end|>';
/** What vLLM's hermes tool parser and qwen3 reasoning parser make of CALL_TEXT. */
const parsedCall = {
  role: 'assistant',
  content: null,
  reasoning_content: 'I should use the calculator.',
  tool_calls: [
    { id: 'call_0', type: 'function', function: { name: 'calc', arguments: '{"x": "6*7", "exact": true}' } },
  ],
};

/** A call as the gateway journals it: the prompt the engine rendered (or was sent), the ids it produced. */
function earlierCall(callId: string, request: ChatRequest, completionText: string, message: object): EarlierCall {
  return {
    callId,
    request,
    promptIds: qwen3.promptIds(request),
    replies: [{ message: message as Record<string, unknown>, completionIds: qwen3.encode(completionText) }],
  };
}

function asMergeCall(callId: string, promptIds: number[], completionIds: number[]): MergeCall {
  return {
    callId,
    policyVersion: 'v1',
    promptIds,
    choices: [{ completionIds, logprobs: completionIds.map(() => -0.5), finishReason: 'stop' }],
  };
}

describe('splicedPrompt with the real Qwen3 template', () => {
  const turn1: ChatRequest = { tools, messages: [{ role: 'user', content: 'What is 6*7?' }] };
  const call1 = earlierCall('c1', turn1, CALL_TEXT, parsedCall);
  // LangChain sends the call back with its own spacing and key order, and without the reasoning.
  const rewritten = {
    role: 'assistant',
    content: '',
    tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'calc', arguments: '{"exact":true,"x":"6*7"}' } }],
  };
  const turn2: ChatRequest = {
    tools,
    messages: [...turn1.messages, rewritten, { role: 'tool', tool_call_id: 'call_0', content: '42' }],
  };

  it('splices the ids the model produced for re-serialised tool-call arguments, so the rollout stays one sequence', () => {
    const spliced = splicedPrompt(turn2, [call1], qwen3);
    if (spliced.ids === null) throw new Error(`not spliced: ${spliced.reason}`);
    expect(spliced.extends).toEqual({ callId: 'c1', choice: 0 });
    const completion1 = call1.replies[0]!.completionIds;
    expect(spliced.ids.slice(call1.promptIds.length, call1.promptIds.length + completion1.length)).toEqual(completion1);
    // Exactly what the template renders had the harness sent back the model's own turn verbatim.
    const verbatim = { role: 'assistant', content: CALL_TEXT.replace('<|im_end|>', '') };
    expect(qwen3.decode(spliced.ids)).toBe(
      qwen3.render({ ...turn2, messages: [...turn1.messages, verbatim, turn2.messages[2]!] }, true),
    );

    const completion2 = qwen3.encode('<think>\nIt says 42.\n</think>\n\n42<|im_end|>');
    const asText = mergeRollout(
      'r',
      [
        asMergeCall('c1', call1.promptIds as number[], completion1 as number[]),
        asMergeCall('c2', qwen3.promptIds(turn2), completion2),
      ],
      qwen3,
    );
    expect(asText.sequences).toHaveLength(2);
    expect(asText.mismatches.map((m) => m.cause)).toEqual(['harness_rewrote_history']);
    const tokenIn = mergeRollout(
      'r',
      [
        asMergeCall('c1', call1.promptIds as number[], completion1 as number[]),
        asMergeCall('c2', spliced.ids, completion2),
      ],
      qwen3,
    );
    expect(tokenIn.sequences).toHaveLength(1);
    expect(tokenIn.mergedCalls).toBe(1);
    expect(tokenIn.mismatches).toEqual([]);
  });

  it("keeps a thinking model's reasoning that the template drops at the next user turn", () => {
    const ask: ChatRequest = { messages: [{ role: 'user', content: 'Name a prime.' }] };
    const text = '<think>\nTwo is the smallest.\n</think>\n\n2<|im_end|>';
    const first = earlierCall('c1', ask, text, {
      role: 'assistant',
      reasoning_content: 'Two is the smallest.',
      content: '2',
    });
    const next: ChatRequest = {
      messages: [...ask.messages, { role: 'assistant', content: '2' }, { role: 'user', content: 'Another?' }],
    };
    expect(qwen3.render(next, true)).not.toContain('Two is the smallest');
    const spliced = splicedPrompt(next, [first], qwen3);
    if (spliced.ids === null) throw new Error(`not spliced: ${spliced.reason}`);
    expect(qwen3.decode(spliced.ids)).toBe(
      `${qwen3.render(ask, true)}${text}\n<|im_start|>user\nAnother?<|im_end|>\n<|im_start|>assistant\n`,
    );
    const merged = mergeRollout(
      'r',
      [
        asMergeCall('c1', first.promptIds as number[], first.replies[0]!.completionIds as number[]),
        asMergeCall('c2', spliced.ids, qwen3.encode('3<|im_end|>')),
      ],
      qwen3,
    );
    expect(merged.sequences).toHaveLength(1);
  });

  it('recognises turns sent as content-part arrays (smolagents) as the same text', () => {
    const parts = (text: string) => [{ type: 'text', text }];
    const ask: ChatRequest = {
      tools,
      messages: [
        { role: 'system', content: parts('You solve arithmetic.') },
        { role: 'user', content: parts('What is 6*7?') },
      ],
    };
    const first = earlierCall(
      'c1',
      {
        ...ask,
        messages: [
          { role: 'system', content: 'You solve arithmetic.' },
          { role: 'user', content: 'What is 6*7?' },
        ],
      },
      CALL_TEXT,
      parsedCall,
    );
    const next: ChatRequest = {
      tools,
      messages: [
        ...ask.messages,
        { ...rewritten, content: parts('') },
        { role: 'tool', tool_call_id: 'call_0', content: parts('42') },
      ],
    };
    const spliced = splicedPrompt(next, [first], qwen3);
    expect(spliced.ids).not.toBeNull();
  });

  it('renders as text, and says why, what it does not recognise', () => {
    expect(splicedPrompt(turn1, [], qwen3)).toEqual({ ids: null, reason: 'first_call' });
    const edited = { ...turn2, messages: [{ role: 'user', content: 'What is 6*8?' }, ...turn2.messages.slice(1)] };
    expect(splicedPrompt(edited, [call1], qwen3)).toEqual({ ids: null, reason: 'not_recognised' });
    const otherAnswer = {
      ...rewritten,
      tool_calls: [{ ...rewritten.tool_calls[0], function: { name: 'calc', arguments: '{"x":"6*8"}' } }],
    };
    const lied = { ...turn2, messages: [turn2.messages[0]!, otherAnswer, turn2.messages[2]!] };
    expect(splicedPrompt(lied, [call1], qwen3)).toEqual({ ids: null, reason: 'not_recognised' });
    const otherTools = { ...turn2, tools: [] };
    expect(splicedPrompt(otherTools, [call1], qwen3)).toEqual({ ids: null, reason: 'not_recognised' });
  });
});
