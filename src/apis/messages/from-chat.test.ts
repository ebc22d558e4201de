import { describe, expect, it } from 'vitest';
import { chatCompletion } from '../../../test/helpers/chat-completions.js';
import { messagesTranslation } from './index.js';

const request = { model: 'claude-ish', max_tokens: 8, messages: [] };

describe('a chat completion as a Message', () => {
  it('has thinking, text and tool_use blocks in order, usage, and no token ids', () => {
    const message = messagesTranslation.fromChat(
      chatCompletion(
        {
          content: 'Let me add.',
          reasoning_content: 'easy',
          tool_calls: [
            { id: 'chatcmpl-tool-ab12', type: 'function', function: { name: 'calc', arguments: '{"x":"1+1"}' } },
            { id: 'call 1!', type: 'function', function: { name: 'calc', arguments: '{"x": ' } },
          ],
        },
        'tool_calls',
      ),
      request,
    );
    expect(message).toMatchObject({
      type: 'message',
      role: 'assistant',
      // The model that answered (the chat answer's), not the name the request asked for.
      model: 'policy',
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 3, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    });
    expect(message.id).toMatch(/^msg_[0-9a-f]{24}$/);
    expect(message.content).toEqual([
      { type: 'thinking', thinking: 'easy', signature: 'rein-unsigned' },
      { type: 'text', text: 'Let me add.', citations: null },
      { type: 'tool_use', id: 'chatcmpl-tool-ab12', name: 'calc', input: { x: '1+1' }, caller: { type: 'direct' } },
      {
        type: 'tool_use',
        id: expect.stringMatching(/^toolu_[0-9a-f]{24}$/),
        name: 'calc',
        input: { rein_unparsed_arguments: '{"x": ' },
        caller: { type: 'direct' },
      },
    ]);
    expect(JSON.stringify(message)).not.toMatch(/token_ids/);
    expect(messagesTranslation.assistantMessageOf(message)).toEqual({
      role: 'assistant',
      content: 'Let me add.',
      reasoning_content: 'easy',
      tool_calls: [
        { id: 'chatcmpl-tool-ab12', type: 'function', function: { name: 'calc', arguments: '{"x":"1+1"}' } },
        {
          id: message.content[3]!.type === 'tool_use' ? message.content[3]!.id : '',
          type: 'function',
          function: { name: 'calc', arguments: '{"x": ' },
        },
      ],
    });
  });

  it('tells each stop: end of turn, max tokens, the stop sequence that matched', () => {
    const stop = (finish: string, stopReason: unknown) => {
      const m = messagesTranslation.fromChat(chatCompletion({ content: 'x' }, finish, stopReason), request);
      return [m.stop_reason, m.stop_sequence];
    };
    expect(stop('stop', null)).toEqual(['end_turn', null]);
    expect(stop('stop', 261)).toEqual(['end_turn', null]); // vLLM: a stop token id, not a string
    expect(stop('length', null)).toEqual(['max_tokens', null]);
    expect(stop('stop', 'END')).toEqual(['stop_sequence', 'END']);
  });

  it("answers refusals in Anthropic's error shape", () => {
    expect(messagesTranslation.errorBody(400, 'BadRequestError', 'bad')).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'bad' },
    });
    expect(messagesTranslation.errorBody(404, 'NotFoundError', 'no model')).toMatchObject({
      error: { type: 'not_found_error' },
    });
    expect(messagesTranslation.errorBody(529, 'overloaded_error', 'busy')).toMatchObject({
      error: { type: 'overloaded_error' },
    });
    expect(messagesTranslation.errorBody(500, 'InternalServerError', 'x')).toMatchObject({
      error: { type: 'api_error' },
    });
  });
});
