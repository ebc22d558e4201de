import { describe, expect, it } from 'vitest';
import { callSpanName, inputMessages, outputMessages, requestAttributes, responseAttributes } from './genai.js';

describe('GenAI span attributes', () => {
  it('names the operation by endpoint and reads the sampling parameters each API spells its own way', () => {
    expect(callSpanName('completions', 'production')).toBe('text_completion production');
    expect(callSpanName('chat.completions', undefined)).toBe('chat');
    expect(
      requestAttributes('chat.completions', {
        model: 'm',
        max_completion_tokens: 64,
        stop: 'END',
        n: 3,
        seed: 7,
        stream: true,
      }),
    ).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.system': 'openai',
      'gen_ai.request.model': 'm',
      'gen_ai.request.max_tokens': 64,
      'gen_ai.request.stop_sequences': ['END'],
      'gen_ai.request.choice.count': 3,
      'gen_ai.request.seed': 7,
      'gen_ai.request.stream': true,
    });
    // Wrong-typed values (which the backend refuses) are left out, not coerced.
    expect(requestAttributes('responses', { model: 'm', max_output_tokens: 9, temperature: 'hot' })).toMatchObject({
      'gen_ai.request.max_tokens': 9,
    });
    expect(requestAttributes('responses', { temperature: 'hot' })).not.toHaveProperty('gen_ai.request.temperature');
  });

  it('reads usage and finish reasons from chat, completions and the Responses API', () => {
    const chat = responseAttributes('chat.completions', {
      response: { id: 'c1', model: 'toy' },
      usage: {
        prompt_tokens: 10,
        completion_tokens: 4,
        prompt_tokens_details: { cached_tokens: 8 },
        completion_tokens_details: { reasoning_tokens: 2 },
      },
      choices: [
        { completionIds: null, logprobs: null, finishReason: 'length' },
        { completionIds: null, logprobs: null, finishReason: null },
      ],
    });
    expect(chat).toEqual({
      'gen_ai.response.id': 'c1',
      'gen_ai.response.model': 'toy',
      'gen_ai.response.finish_reasons': ['length'],
      'gen_ai.usage.input_tokens': 10,
      'gen_ai.usage.output_tokens': 4,
      'gen_ai.usage.cache_read.input_tokens': 8,
      'gen_ai.usage.reasoning.output_tokens': 2,
    });
    expect(
      responseAttributes('responses', {
        response: { status: 'completed' },
        usage: { input_tokens: 3, output_tokens: 1 },
        choices: [],
      }),
    ).toEqual({
      'gen_ai.response.finish_reasons': ['completed'],
      'gen_ai.usage.input_tokens': 3,
      'gen_ai.usage.output_tokens': 1,
    });
    expect(responseAttributes('completions', { response: undefined, usage: null, choices: [] })).toEqual({});
  });

  it('writes messages in the conventions’ role-and-parts shape, tool calls and results included', () => {
    const input = inputMessages('chat.completions', {
      messages: [
        { role: 'user', content: '6*7?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 't1', type: 'function', function: { name: 'calc', arguments: '{"x":"6*7"}' } }],
        },
        { role: 'tool', tool_call_id: 't1', content: '42' },
      ],
    });
    expect(JSON.parse(input!)).toEqual([
      { role: 'user', parts: [{ type: 'text', content: '6*7?' }] },
      { role: 'assistant', parts: [{ type: 'tool_call', id: 't1', name: 'calc', arguments: { x: '6*7' } }] },
      { role: 'tool', parts: [{ type: 'tool_call_response', id: 't1', response: '42' }] },
    ]);
    expect(JSON.parse(inputMessages('completions', { prompt: 'Once' })!)).toEqual([
      { role: 'user', parts: [{ type: 'text', content: 'Once' }] },
    ]);
    expect(
      JSON.parse(outputMessages('completions', { choices: [{ text: ' upon', finish_reason: 'length' }] })!),
    ).toEqual([{ role: 'assistant', parts: [{ type: 'text', content: ' upon' }], finish_reason: 'length' }]);
    expect(outputMessages('chat.completions', 'not an object')).toBeUndefined();
  });

  it('writes a content-part array as one part per content part, not as the JSON of the array', () => {
    const input = inputMessages('chat.completions', {
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
            { type: 'text', text: 'this picture?' },
          ],
        },
      ],
    });
    // Media parts by their type only: their data (often inline base64) stays out of the trace.
    expect(JSON.parse(input!)).toEqual([
      {
        role: 'user',
        parts: [
          { type: 'text', content: 'What is in' },
          { type: 'image_url' },
          { type: 'text', content: 'this picture?' },
        ],
      },
    ]);
  });
});
