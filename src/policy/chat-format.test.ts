import { describe, expect, it } from 'vitest';
import { mergeRollout } from '../samples/merge.js';
import { ChatTokenizer, type ChatRequest } from '../tokenizer/chat-tokenizer.js';
import { parseToolCalls, specialTokenId, tokenizerConfig, tokenizerJson, VOCAB_SIZE } from './chat-format.js';

const tokenizer = new ChatTokenizer(tokenizerJson(), tokenizerConfig() as Record<string, unknown>);

describe('the embedded policy tokenizer', () => {
  it('encodes any text byte by byte, specials as single tokens, and decodes it back', () => {
    const text = '<|user|>What is 6*7? Ünïcode ✓\n<|end|><tool_call>calc{"x": "6*7"}</tool_call>';
    const ids = tokenizer.encode(text);
    expect(tokenizer.decode(ids)).toBe(text);
    expect(ids[0]).toBe(specialTokenId('<|user|>'));
    expect(ids[1]).toBe('W'.charCodeAt(0));
    expect(Math.max(...ids)).toBeLessThan(VOCAB_SIZE);
  });

  it('decodes an empty reply (a model that ends its turn at once) to empty text', () => {
    // The policy server decodes a reply without its end-of-turn token; the library throws on [].
    expect(tokenizer.decode([])).toBe('');
  });

  it('renders a compact chat, and a tool call exactly as the model wrote it', () => {
    const text = tokenizer.render(
      {
        messages: [
          { role: 'system', content: 'calc' },
          { role: 'user', content: '6*7?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'calc', arguments: '{"x":"6*7"}' } }],
          },
          { role: 'tool', tool_call_id: 'call_0', content: '42' },
        ],
      },
      true,
    );
    expect(text).toBe(
      '<|system|>calc<|end|><|user|>6*7?<|end|><|assistant|><tool_call>calc{"x":"6*7"}</tool_call><|end|><|tool|>42<|end|><|assistant|>',
    );
  });

  it('keeps the prompt prefix across tool-use turns, so the turns merge into one sequence', () => {
    const turn1: ChatRequest = { messages: [{ role: 'user', content: '6*7?' }] };
    const generated1 = '<tool_call>calc{"x":"6*7"}</tool_call><|end|>';
    const parsed = parseToolCalls(generated1.replace('<|end|>', ''));
    const turn2: ChatRequest = {
      messages: [
        ...turn1.messages,
        { role: 'assistant', content: parsed.content, tool_calls: parsed.toolCalls },
        { role: 'tool', tool_call_id: 'call_0', content: '42' },
      ],
    };
    const call = (callId: string, request: ChatRequest, completion: string) => ({
      callId,
      policyVersion: 'v1',
      promptIds: tokenizer.promptIds(request),
      choices: [{ completionIds: tokenizer.encode(completion), logprobs: null, finishReason: 'stop' }],
    });
    const result = mergeRollout('r', [call('c1', turn1, generated1), call('c2', turn2, '42<|end|>')], tokenizer);
    expect(result.mismatches).toEqual([]);
    expect(result.sequences).toHaveLength(1);
  });

  // smolagents sends every message as text parts, its own earlier replies too.
  const parts = (request: ChatRequest): ChatRequest => ({
    messages: request.messages.map((m) =>
      typeof m.content === 'string' ? { ...m, content: [{ type: 'text', text: m.content }] } : m,
    ),
  });
  const stringTurns: ChatRequest[] = [
    {
      messages: [
        { role: 'system', content: 'You solve arithmetic.' },
        { role: 'user', content: '6*7?' },
      ],
    },
  ];
  const first = stringTurns[0] as ChatRequest;
  stringTurns.push({
    messages: [
      ...first.messages,
      { role: 'assistant', content: 'Thought: multiply.' },
      { role: 'user', content: 'Go on.' },
    ],
  });

  it('renders text-part arrays as vLLM does: the same ids as string contents, parts joined by a newline', () => {
    for (const turn of stringTurns) expect(tokenizer.promptIds(parts(turn))).toEqual(tokenizer.promptIds(turn));
    const split = tokenizer.render(
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'a' },
              { type: 'text', text: 'b' },
            ],
          },
        ],
      },
      false,
    );
    expect(split).toBe('<|user|>a\nb<|end|>');
  });

  it('merges a rollout whose messages are text parts into one sequence', () => {
    const call = (callId: string, request: ChatRequest, completion: string) => ({
      callId,
      policyVersion: 'v1',
      promptIds: tokenizer.promptIds(parts(request)),
      choices: [{ completionIds: tokenizer.encode(completion), logprobs: null, finishReason: 'stop' }],
    });
    const calls = [
      call('c1', first, 'Thought: multiply.<|end|>'),
      call('c2', stringTurns[1] as ChatRequest, '42<|end|>'),
    ];
    const result = mergeRollout('r', calls, tokenizer);
    expect(result.mismatches).toEqual([]);
    expect(result.sequences).toHaveLength(1);
  });
});

describe('parseToolCalls', () => {
  it('turns calls into OpenAI tool calls and keeps the rest as content', () => {
    expect(parseToolCalls('Let me check.<tool_call>calc{"x":"1+1"}</tool_call>')).toEqual({
      content: 'Let me check.',
      toolCalls: [{ id: 'call_0', type: 'function', function: { name: 'calc', arguments: '{"x":"1+1"}' } }],
    });
    expect(
      parseToolCalls('<tool_call>a{}</tool_call><tool_call>b{"k":1}</tool_call>').toolCalls.map((c) => c.function.name),
    ).toEqual(['a', 'b']);
    expect(parseToolCalls('<tool_call>a{}</tool_call>').content).toBeNull();
  });

  it('leaves a malformed call in the content', () => {
    expect(parseToolCalls('<tool_call>calc{"x":</tool_call>')).toEqual({
      content: '<tool_call>calc{"x":</tool_call>',
      toolCalls: [],
    });
    expect(parseToolCalls('The answer is 42')).toEqual({ content: 'The answer is 42', toolCalls: [] });
  });

  it('reads arguments whose string holds }</tool_call> to their real end', () => {
    const args = '{"html":"a}</tool_call>b","n":1}';
    expect(parseToolCalls(`<tool_call>put${args}</tool_call>`).toolCalls.map((c) => c.function.arguments)).toEqual([
      args,
    ]);
  });
});
