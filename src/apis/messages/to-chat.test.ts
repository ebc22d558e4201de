import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ApiRequestError } from '../translation.js';
import { messagesTranslation, messagesTranslationFor, type MessagesRequest } from './index.js';
import { argumentsOfInput, inputOfArguments } from './tool-arguments.js';

const ask = (fields: Partial<MessagesRequest> & Record<string, unknown>) =>
  messagesTranslation.toChat({ model: 'm', max_tokens: 16, messages: [], ...fields } as MessagesRequest);

function refusal(fields: Record<string, unknown>): ApiRequestError {
  try {
    ask(fields);
  } catch (err) {
    expect(err).toBeInstanceOf(ApiRequestError);
    return err as ApiRequestError;
  }
  throw new Error('not refused');
}

describe('a Messages request as a chat request', () => {
  it('puts the system prompt first and turns text blocks into text content', () => {
    const chat = ask({
      system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: [{ type: 'text', text: 'hello' }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
        },
      ],
    });
    expect(chat.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      },
    ]);
    expect(chat).toMatchObject({ model: 'm', max_tokens: 16 });
  });

  it('makes one assistant message of text, thinking and tool_use, and tool messages before the user text', () => {
    const chat = ask({
      messages: [
        { role: 'user', content: 'weather in Oslo and Rome?' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'two cities', signature: 'x' },
            { type: 'text', text: 'Checking.' },
            { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Oslo' } },
            { type: 'tool_use', id: 'toolu_2', name: 'weather', input: { city: 'Rome', days: 2 } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: '5C' },
            {
              type: 'tool_result',
              tool_use_id: 'toolu_2',
              content: [{ type: 'text', text: 'timeout' }],
              is_error: true,
            },
            { type: 'text', text: 'and tomorrow?' },
          ],
        },
      ],
    });
    expect(chat.messages.slice(1)).toEqual([
      {
        role: 'assistant',
        content: 'Checking.',
        reasoning_content: 'two cities',
        tool_calls: [
          { id: 'toolu_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } },
          { id: 'toolu_2', type: 'function', function: { name: 'weather', arguments: '{"city":"Rome","days":2}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'toolu_1', content: '5C' },
      { role: 'tool', tool_call_id: 'toolu_2', content: 'Error: timeout' },
      { role: 'user', content: 'and tomorrow?' },
    ]);
  });

  it('maps tools, tool_choice, sampling, stop sequences, thinking and metadata', () => {
    const chat = ask({
      tools: [{ name: 'calc', description: 'adds', input_schema: { type: 'object', properties: {} } }],
      tool_choice: { type: 'auto', disable_parallel_tool_use: true },
      temperature: 0.5,
      top_p: 0.9,
      top_k: 20,
      stop_sequences: ['END'],
      thinking: { type: 'enabled', budget_tokens: 1024 },
      metadata: { user_id: 'u1' },
      stream: true,
    });
    expect(chat).toMatchObject({
      tools: [
        {
          type: 'function',
          function: { name: 'calc', description: 'adds', parameters: { type: 'object', properties: {} } },
        },
      ],
      tool_choice: 'auto',
      parallel_tool_calls: false,
      temperature: 0.5,
      top_p: 0.9,
      top_k: 20,
      stop: ['END'],
      chat_template_kwargs: { enable_thinking: true },
      user: 'u1',
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(ask({ tool_choice: { type: 'any' } }).tool_choice).toBe('required');
    expect(ask({ tool_choice: { type: 'none' } }).tool_choice).toBe('none');
    expect(ask({ tool_choice: { type: 'tool', name: 'calc' } }).tool_choice).toEqual({
      type: 'function',
      function: { name: 'calc' },
    });
    expect(ask({ thinking: { type: 'disabled' } }).chat_template_kwargs).toEqual({ enable_thinking: false });
    expect(ask({}).parallel_tool_calls).toBeUndefined();
  });

  it('refuses what chat cannot honor, naming it', () => {
    expect(refusal({ max_tokens: undefined }).message).toBe('max_tokens: Field required');
    expect(refusal({ output_config: { effort: 'low' } }).message).toMatch(/^output_config: not supported/);
    expect(refusal({ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }).message).toMatch(
      /tools\[0\]: "web_search_20250305" is an Anthropic server tool/,
    );
    const image = { type: 'image', source: { type: 'url', url: 'https://x/y.png' } };
    expect(refusal({ messages: [{ role: 'user', content: [image] }] }).message).toMatch(
      /messages\[0\]\.content\[0\]: content block type "image" is not supported/,
    );
    const doc = { type: 'tool_result', tool_use_id: 't', content: [{ type: 'document' }] };
    expect(refusal({ messages: [{ role: 'user', content: [doc] }] }).message).toMatch(/"document"/);
    const redacted = { type: 'redacted_thinking', data: 'abc' };
    expect(refusal({ messages: [{ role: 'assistant', content: [redacted] }] }).message).toMatch(
      /redacted_thinking block holds Anthropic's encrypted reasoning/,
    );
    expect(refusal({ stop_sequences: ['x'], container: 'c' }).status).toBe(400);
    expect(refusal({ thinking: { type: 'between_tools' } }).message).toMatch(/thinking.type/);
    // Prompt caching and the service tier change nothing the model writes: taken.
    expect(() => ask({ cache_control: { type: 'ephemeral' }, service_tier: 'auto' })).not.toThrow();
  });
});

describe('tool arguments between chat and Messages', () => {
  const json = fc.jsonValue({ maxDepth: 3 });
  const objects = fc.dictionary(
    fc.string().filter((k) => !/^(0|[1-9]\d*)$/.test(k)),
    json,
  );

  it('come back as the same text, in the style they were written', () => {
    fc.assert(
      fc.property(objects, (input) => {
        const compact = JSON.stringify(input);
        expect(argumentsOfInput(inputOfArguments(compact), 'compact')).toBe(compact);
        const python = argumentsOfInput(input, 'python');
        expect(JSON.parse(python)).toEqual(JSON.parse(compact));
        expect(argumentsOfInput(inputOfArguments(python), 'python')).toBe(python);
      }),
    );
    expect(argumentsOfInput({ a: [1, 'é'], b: { c: null } }, 'python')).toBe('{"a": [1, "é"], "b": {"c": null}}');
  });

  it('that are not a JSON object are handed over wrapped and come back exactly', () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        const input = inputOfArguments(text);
        expect(argumentsOfInput(input, 'compact')).toBe(text);
      }),
    );
    expect(inputOfArguments('{"x": ')).toEqual({ rein_unparsed_arguments: '{"x": ' });
    const python = messagesTranslationFor('python').toChat({
      model: 'm',
      max_tokens: 1,
      messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'f', input: { a: 1, b: 2 } }] }],
    });
    expect(python.messages[0]).toMatchObject({ tool_calls: [{ function: { arguments: '{"a": 1, "b": 2}' } }] });
  });
});
