import { describe, expect, it } from 'vitest';
import { qwen3 } from '../../test/helpers/qwen3.js';
import { mergeRollout } from '../samples/merge.js';
import type { ChatRequest } from './chat-tokenizer.js';

const tools = [
  {
    type: 'function',
    function: {
      name: 'calculator',
      description: 'Evaluate arithmetic',
      parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
    },
  },
];
const toolCall = {
  id: 'call_1',
  type: 'function',
  function: { name: 'calculator', arguments: '{"expression": "6*7"}' },
};

/** What an engine journals for one call: the prompt ids it rendered, the reply ids it generated. */
function engineCall(callId: string, request: ChatRequest, reply: Record<string, unknown>) {
  return {
    callId,
    policyVersion: 'v1',
    promptIds: qwen3.promptIds(request),
    choices: [{ completionIds: qwen3.completionIds(request, reply), logprobs: null, finishReason: 'stop' }],
  };
}

describe('ChatTokenizer with the real Qwen3 tokenizer and template', () => {
  it('renders tools, tool calls and tool results, and its ids decode back to the text', () => {
    const request: ChatRequest = {
      tools,
      messages: [
        { role: 'system', content: 'You are a calculator agent.' },
        { role: 'user', content: 'What is 6*7?' },
        { role: 'assistant', content: '', tool_calls: [toolCall] },
        { role: 'tool', tool_call_id: 'call_1', content: '42' },
      ],
    };
    const text = qwen3.render(request, true);
    expect(text).toContain('# Tools');
    expect(text).toContain(
      '<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call><|im_end|>',
    );
    expect(text).toContain('<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>');
    expect(text.endsWith('<|im_start|>assistant\n')).toBe(true);
    const ids = qwen3.promptIds(request);
    expect(qwen3.decode(ids)).toBe(text);
    expect(ids.filter((id) => id === qwen3.encode('<|im_start|>')[0]).length).toBe(5);
    expect(qwen3.encode('<|im_start|>')).toHaveLength(1);
  });

  it('turns off thinking through chat_template_kwargs', () => {
    const text = qwen3.render(
      { messages: [{ role: 'user', content: 'hi' }], chat_template_kwargs: { enable_thinking: false } },
      true,
    );
    expect(text.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
  });

  it('keeps the prefix through a multi-step tool loop, so the calls merge into one sequence', () => {
    const turn1: ChatRequest = { tools, messages: [{ role: 'user', content: 'What is 6*7?' }] };
    const reply1 = {
      role: 'assistant',
      reasoning_content: 'I should use the calculator.',
      content: '',
      tool_calls: [toolCall],
    };
    const turn2: ChatRequest = {
      tools,
      messages: [...turn1.messages, reply1, { role: 'tool', tool_call_id: 'call_1', content: '42' }],
    };
    const reply2 = { role: 'assistant', reasoning_content: 'The tool says 42.', content: 'The answer is 42.' };

    const result = mergeRollout('r', [engineCall('c1', turn1, reply1), engineCall('c2', turn2, reply2)], qwen3);
    expect(result.mismatches).toEqual([]);
    expect(result.sequences).toHaveLength(1);
    const trained = result.sequences[0]!.ids.filter((_, i) => result.sequences[0]!.lossMask[i] === 1);
    expect(qwen3.decode(trained)).toBe(
      '<think>\nI should use the calculator.\n</think>\n\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call><|im_end|>' +
        '<think>\nThe tool says 42.\n</think>\n\nThe answer is 42.<|im_end|>',
    );
  });

  it('sees the template drop earlier thinking at the next user turn, and names it', () => {
    const turn1: ChatRequest = { messages: [{ role: 'user', content: 'Name a prime.' }] };
    const reply1 = { role: 'assistant', reasoning_content: 'Two is the smallest.', content: '2' };
    const turn2: ChatRequest = { messages: [...turn1.messages, reply1, { role: 'user', content: 'Another?' }] };
    const reply2 = { role: 'assistant', reasoning_content: 'Three.', content: '3' };

    const result = mergeRollout('r', [engineCall('c1', turn1, reply1), engineCall('c2', turn2, reply2)], qwen3);
    expect(result.sequences).toHaveLength(2);
    expect(result.mismatches).toEqual([
      { callId: 'c2', cause: 'chat_template_rewrote_history', divergesAt: expect.any(Number) },
    ]);
    expect(qwen3.render(turn2, true)).not.toContain('Two is the smallest');
  });
});
