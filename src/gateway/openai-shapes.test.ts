import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { extractTokens, SseParser, StreamAssembler, stripInjected, upstreamRequest } from './openai-shapes.js';

const backend = { endpoints: ['http://x/v1'], tokenIds: true, logprobs: true };

describe('SseParser', () => {
  it('reads each event\'s data lines as the SSE rules say, whatever its line endings', () => {
    const reference = (raw: string) => {
      const lines = raw.split(/\r?\n/).filter((line) => line.startsWith('data:'));
      return lines.length === 0 ? null : lines.map((line) => line.slice(line.startsWith('data: ') ? 6 : 5)).join('\n');
    };
    const text = fc.string({ unit: fc.constantFrom('a', '{', '"', ' ', '\r', 'é') });
    const line = fc.oneof(text.map((t) => `data: ${t}`), text.map((t) => `data:${t}`), text.map((t) => `: ${t}`));
    const eol = fc.constantFrom('\n', '\r\n');
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.array(fc.tuple(line, eol), { minLength: 1, maxLength: 3 }), eol), { minLength: 1, maxLength: 5 }), (events) => {
        const texts = events.map(([lines, end]) => lines.map(([l, e]) => `${l}${e}`).join('') + end);
        const parsed = new SseParser().push(texts.join(''));
        expect(parsed.map((e) => e.data)).toEqual(parsed.map((e) => reference(e.raw)));
        expect(parsed.map((e) => e.raw).join('')).toBe(texts.join('').slice(0, parsed.map((e) => e.raw).join('').length));
      }),
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
  it('asks for what training needs and takes it out again', () => {
    const { sent, injected } = upstreamRequest('chat.completions', { model: 'production', stream: true, messages: [] }, 'base', backend);
    expect(sent).toEqual({ model: 'base', stream: true, messages: [], return_token_ids: true, logprobs: true, stream_options: { include_usage: true } });
    const chunk = { prompt_token_ids: [1], choices: [{ index: 0, delta: { content: 'x' }, token_ids: [5], logprobs: { content: [] } }], usage: null };
    expect(stripInjected(chunk, injected)).toBe(true);
    expect(chunk).toEqual({ choices: [{ index: 0, delta: { content: 'x' }, logprobs: null }] });
    expect(stripInjected({ choices: [], usage: { prompt_tokens: 3 } }, injected)).toBe(false);
  });

  it('leaves alone what the harness asked for itself', () => {
    const { sent, injected } = upstreamRequest('completions', { model: 'p', prompt: 'hi', logprobs: 2, return_token_ids: true }, 'base', backend);
    expect(sent).toMatchObject({ logprobs: 2, return_token_ids: true });
    expect(injected).toEqual({ tokenIds: false, logprobs: false, usage: false });
  });
});

describe('StreamAssembler', () => {
  it('rebuilds a chat response with tool calls, token ids and log-probs from its chunks', () => {
    const assembler = new StreamAssembler('chat.completions');
    const chunks = [
      { id: 'c1', created: 1, model: 'm', prompt_token_ids: [1, 2, 3], choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] },
      { id: 'c1', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'calc', arguments: '' } }] } }] },
      { id: 'c1', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"x":' } }] }, token_ids: [7, 8], logprobs: { content: [{ token: 'a', logprob: -0.5 }, { token: 'b', logprob: -0.25 }] } }] },
      { id: 'c1', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '1}' } }] }, token_ids: [9], logprobs: { content: [{ token: 'c', logprob: -1 }] } }] },
      { id: 'c1', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
      { id: 'c1', choices: [], usage: { prompt_tokens: 3, completion_tokens: 3 } },
    ];
    chunks.forEach((c) => assembler.add(c));
    const response = assembler.response();
    expect(response).toMatchObject({
      id: 'c1',
      object: 'chat.completion',
      choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'calc', arguments: '{"x":1}' } }] } }],
      usage: { completion_tokens: 3 },
    });
    expect(extractTokens('chat.completions', response)).toEqual({
      promptIds: [1, 2, 3],
      choices: [{ completionIds: [7, 8, 9], logprobs: [-0.5, -0.25, -1], finishReason: 'tool_calls' }],
      usage: { prompt_tokens: 3, completion_tokens: 3 },
    });
  });
});
