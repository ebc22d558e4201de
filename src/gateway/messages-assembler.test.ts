import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { describe, expect, it } from 'vitest';
import { messagesTranslation } from '../apis/messages/index.js';
import { MessagesAssembler } from './messages-assembler.js';
import { SseParser } from './sse.js';

const request = { model: 'm', max_tokens: 64, messages: [{ role: 'user' as const, content: 'hi' }], stream: true };

function chunk(delta: object, extra: object = {}): ChatCompletionChunk {
  return {
    id: 'c',
    object: 'chat.completion.chunk',
    created: 0,
    model: 'm',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }],
  } as unknown as ChatCompletionChunk;
}

describe("a backend's own /v1/messages stream, assembled for the journal", () => {
  it('gives the Message the stream told: thinking, text and a tool call with its input', () => {
    const translator = messagesTranslation.streamFromChat(request);
    const chunks = [
      chunk({ role: 'assistant', content: '' }),
      chunk({ reasoning_content: 'add ' }),
      chunk({ reasoning_content: 'them' }),
      chunk({ content: 'Let me ' }),
      chunk({ content: 'check.' }),
      chunk({
        tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'calc', arguments: '{"x":' } }],
      }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"2+2"}' } }] }),
      chunk({}, { finish_reason: 'tool_calls' }),
      { ...chunk({}), choices: [], usage: { prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 } },
    ];
    const sse = chunks.map((c) => translator.chunk(c)).join('') + translator.end();
    const assembler = new MessagesAssembler();
    for (const event of new SseParser().push(sse)) assembler.add(JSON.parse(event.data as string));
    const told = translator.answer();
    expect(assembler.response()).toEqual(JSON.parse(JSON.stringify(told)));
    expect(told.content.map((block) => block.type)).toEqual(['thinking', 'text', 'tool_use']);
  });

  it('refuses a delta for a block that never started (the call is then not one to learn from)', () => {
    const assembler = new MessagesAssembler();
    expect(() =>
      assembler.add({ type: 'content_block_delta', index: 3, delta: { type: 'text_delta', text: 'x' } }),
    ).toThrow(/block 3, which never started/);
  });
});
