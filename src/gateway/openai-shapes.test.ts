import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { extractTokens, responseProblem, stripInjected, stripInjectedText, upstreamRequest } from './openai-shapes.js';
import { SseParser } from './sse.js';
import { StreamAssembler } from './stream-assembler.js';

const backend = { endpoints: ['http://x/v1'], tokenIds: true, logprobs: true };

describe('SseParser', () => {
  it("reads each event's data lines as the SSE rules say, whatever its line endings", () => {
    const reference = (raw: string) => {
      const lines = raw.split(/\r?\n/).filter((line) => line.startsWith('data:'));
      return lines.length === 0 ? null : lines.map((line) => line.slice(line.startsWith('data: ') ? 6 : 5)).join('\n');
    };
    const text = fc.string({ unit: fc.constantFrom('a', '{', '"', ' ', '\r', 'é') });
    const line = fc.oneof(
      text.map((t) => `data: ${t}`),
      text.map((t) => `data:${t}`),
      text.map((t) => `: ${t}`),
    );
    const eol = fc.constantFrom('\n', '\r\n');
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.array(fc.tuple(line, eol), { minLength: 1, maxLength: 3 }), eol), {
          minLength: 1,
          maxLength: 5,
        }),
        (events) => {
          const texts = events.map(([lines, end]) => lines.map(([l, e]) => `${l}${e}`).join('') + end);
          const parsed = new SseParser().push(texts.join(''));
          expect(parsed.map((e) => e.data)).toEqual(parsed.map((e) => reference(e.raw)));
          expect(parsed.map((e) => e.raw).join('')).toBe(
            texts.join('').slice(0, parsed.map((e) => e.raw).join('').length),
          );
        },
      ),
      { numRuns: 500 },
    );
  });

  it('yields the same events however the bytes are split', () => {
    const stream = 'data: {"a":1}\n\n: keep-alive\n\ndata: {"b":2}\r\n\r\ndata: [DONE]\n\n';
    fc.assert(
      fc.property(fc.array(fc.nat({ max: stream.length }), { maxLength: 10 }), (cuts) => {
        const points = [...new Set(cuts)].sort((a, b) => a - b);
        const parser = new SseParser();
        const events = [];
        let start = 0;
        for (const point of [...points, stream.length]) {
          events.push(...parser.push(stream.slice(start, point)));
          start = point;
        }
        expect(events.map((e) => e.data)).toEqual(['{"a":1}', null, '{"b":2}', '[DONE]']);
        expect(events.map((e) => e.raw).join('')).toBe(stream);
        expect(parser.rest()).toBe('');
      }),
    );
  });
});

describe('upstreamRequest and stripInjected', () => {
  const request = (endpoint: 'chat.completions' | 'completions', text: string) =>
    upstreamRequest(endpoint, JSON.parse(text) as Record<string, unknown>, text, 'base', backend);

  it('asks for what training needs and takes it out again, every other byte as it was', () => {
    const text =
      '{"model": "production", "stream": true, "seed": 9007199254740993, "temperature": 1.0, "top_p": -0.0, "messages": []}';
    const { sent, sentText, injected } = request('chat.completions', text);
    expect(sentText).toBe(
      '{"model": "base", "stream": true, "seed": 9007199254740993, "temperature": 1.0, "top_p": -0.0, "messages": [],"return_token_ids":true,"logprobs":true}',
    );
    expect(sent).toEqual({
      model: 'base',
      stream: true,
      seed: 9007199254740992,
      temperature: 1,
      top_p: -0,
      messages: [],
      return_token_ids: true,
      logprobs: true,
    });
    const chunk =
      '{"id":"c","prompt_token_ids":[1],"choices":[{"index":0,"delta":{"content":"x"},"token_ids":[5],"logprobs":{"content":[]},"x":0.0}],"usage":null}';
    expect(stripInjectedText(chunk, injected)).toBe(
      '{"id":"c","choices":[{"index":0,"delta":{"content":"x"},"logprobs":null,"x":0.0}],"usage":null}',
    );
    const parsed = JSON.parse(chunk) as Record<string, unknown>;
    stripInjected(parsed, injected);
    expect(parsed).toEqual({
      id: 'c',
      choices: [{ index: 0, delta: { content: 'x' }, logprobs: null, x: 0 }],
      usage: null,
    });
  });

  it('asks a shadow call for one whole body, whatever the harness streamed', () => {
    for (const text of [
      '{"stream_options":{"include_usage":true},"stream":true}',
      '{"messages":[],"stream":true,"stream_options":{}}',
      '{"stream_options":{}}',
    ]) {
      const { sent, sentText } = upstreamRequest(
        'chat.completions',
        JSON.parse(text) as Record<string, unknown>,
        text,
        'base',
        backend,
        true,
      );
      expect(JSON.parse(sentText)).toEqual(sent);
      expect(sent).toMatchObject({ model: 'base', stream: false });
      expect(sent).not.toHaveProperty('stream_options');
    }
  });

  it('adds no key the backend did not send', () => {
    const injected = { tokenIds: true, logprobs: true };
    expect(stripInjectedText('{"choices":[{"index":0,"text":"a"}, null, 7]}', injected)).toBe(
      '{"choices":[{"index":0,"text":"a"}, null, 7]}',
    );
  });

  it('leaves alone what the harness asked for itself, even of a wrong type, for the backend to judge', () => {
    for (const text of [
      '{"model":"p","prompt":"hi","logprobs":2,"return_token_ids":true}',
      '{"model":"p","prompt":"hi","logprobs":"yes","return_token_ids":"yes"}',
    ]) {
      const { sentText, injected } = request('completions', text);
      expect(sentText).toBe(text.replace('"p"', '"base"'));
      expect(injected).toEqual({ tokenIds: false, logprobs: false });
    }
    const chat = request('chat.completions', '{"model":"p","messages":[],"logprobs":1,"return_token_ids":1}');
    expect(chat.sentText).toBe('{"model":"base","messages":[],"logprobs":1,"return_token_ids":1}');
    // top_logprobs without logprobs is refused by the backend; asking for log-probs would make it pass.
    expect(request('chat.completions', '{"model":"p","messages":[],"top_logprobs":2}').sentText).toBe(
      '{"model":"base","messages":[],"top_logprobs":2,"return_token_ids":true}',
    );
    // Off said explicitly is still off: the gateway may ask and take it out again.
    expect(request('chat.completions', '{"model":"p","messages":[],"logprobs":false}').sentText).toBe(
      '{"model":"base","messages":[],"logprobs":true,"return_token_ids":true}',
    );
  });
});

describe('responseProblem', () => {
  it.each([
    [{ choices: [{ index: 0 }, null, 7] }, 'choices[1] is not an object'],
    [{ choices: 'notarray' }, 'choices is not an array'],
    [{ choices: [{ index: 0, logprobs: { content: [null] } }] }, 'logprobs.content'],
    [{ choices: [{ index: 0, token_ids: ['a', null, 4294967297, 7.9] }] }, 'token_ids'],
    [{ choices: [{ index: 0, token_ids: [4294967296] }] }, 'token_ids'],
    [{ choices: [{ index: 0, logprobs: { content: [{ logprob: 1e40 }] } }] }, 'logprobs.content'],
    [{ choices: [{ index: 0, logprobs: { content: [{ logprob: 'nan' }] } }] }, 'logprobs.content'],
    [{ choices: [], prompt_token_ids: [1, -1] }, 'prompt_token_ids'],
  ])('refuses %j', (response, problem) => {
    expect(responseProblem('chat.completions', response as Record<string, unknown>)).toContain(problem);
  });

  it('accepts what vLLM sends', () => {
    expect(
      responseProblem('chat.completions', {
        choices: [{ index: 0, token_ids: [0, 4294967295], logprobs: { content: [{ logprob: -0.5 }, { logprob: 0 }] } }],
        prompt_token_ids: [1],
      }),
    ).toBeNull();
    expect(
      responseProblem('completions', { choices: [{ index: 0, logprobs: { token_logprobs: [null, -1] } }] }),
    ).toBeNull();
    expect(responseProblem('chat.completions', { id: 'x', usage: {} }, true)).toBeNull();
    expect(
      responseProblem(
        'chat.completions',
        { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{' } }] } }] },
        true,
      ),
    ).toBeNull();
  });

  it('refuses a stream chunk the assembler would misread', () => {
    expect(responseProblem('chat.completions', { choices: [{ index: 0, delta: 'x' }] }, true)).toContain(
      'delta is not an object',
    );
    expect(
      responseProblem('chat.completions', { choices: [{ index: 0, delta: { tool_calls: 'abc' } }] }, true),
    ).toContain('tool_calls');
    expect(
      responseProblem('chat.completions', { choices: [{ index: 0, delta: { tool_calls: [null] } }] }, true),
    ).toContain('tool_calls');
  });
});

describe('StreamAssembler', () => {
  it('rebuilds a chat response with tool calls, token ids and log-probs from its chunks', () => {
    const assembler = new StreamAssembler('chat.completions');
    const chunks = [
      {
        id: 'c1',
        created: 1,
        model: 'm',
        prompt_token_ids: [1, 2, 3],
        choices: [{ index: 0, delta: { role: 'assistant', content: '' } }],
      },
      {
        id: 'c1',
        choices: [
          {
            index: 0,
            delta: {
              tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'calc', arguments: '' } }],
            },
          },
        ],
      },
      {
        id: 'c1',
        choices: [
          {
            index: 0,
            delta: { tool_calls: [{ index: 0, function: { arguments: '{"x":' } }] },
            token_ids: [7, 8],
            logprobs: {
              content: [
                { token: 'a', logprob: -0.5 },
                { token: 'b', logprob: -0.25 },
              ],
            },
          },
        ],
      },
      {
        id: 'c1',
        choices: [
          {
            index: 0,
            delta: { tool_calls: [{ index: 0, function: { arguments: '1}' } }] },
            token_ids: [9],
            logprobs: { content: [{ token: 'c', logprob: -1 }] },
          },
        ],
      },
      { id: 'c1', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
      { id: 'c1', choices: [], usage: { prompt_tokens: 3, completion_tokens: 3 } },
    ];
    chunks.forEach((c) => assembler.add(c));
    const response = assembler.response();
    expect(response).toMatchObject({
      id: 'c1',
      object: 'chat.completion',
      choices: [
        {
          index: 0,
          finish_reason: 'tool_calls',
          message: {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'calc', arguments: '{"x":1}' } }],
          },
        },
      ],
      usage: { completion_tokens: 3 },
    });
    expect(extractTokens('chat.completions', response)).toEqual({
      promptIds: [1, 2, 3],
      choices: [{ completionIds: [7, 8, 9], logprobs: [-0.5, -0.25, -1], finishReason: 'tool_calls' }],
      usage: { prompt_tokens: 3, completion_tokens: 3 },
    });
  });
});
