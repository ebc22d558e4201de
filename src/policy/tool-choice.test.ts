import { describe, expect, it } from 'vitest';
import { ZodError } from 'zod';
import { ChatTokenizer } from '../tokenizer/chat-tokenizer.js';
import { END_OF_TURN, parseToolCalls, specialTokenId, tokenizerConfig, tokenizerJson } from './chat-format.js';
import { chatLogprobs, completionTopLogprobs } from './openai-replies.js';
import { HttpError } from './policy-http.js';
import { chatRequest, completionRequest, parseRequest } from './request-fields.js';
import { replyToolCalls, toolShaping } from './tool-choice.js';

const tokenizer = new ChatTokenizer(tokenizerJson(), tokenizerConfig() as Record<string, unknown>);
const tools = [{ type: 'function', function: { name: 'calc', parameters: {} } }];
const START = specialTokenId('<tool_call>');
const END = specialTokenId('</tool_call>');
const messages = [{ role: 'user', content: 'hi' }];

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    if (err instanceof HttpError) return `${err.status} ${err.message}`;
    // As the server answers a ZodError (server.ts): 400, each issue as `path: message`.
    if (err instanceof ZodError) return `400 ${err.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`;
    throw err;
  }
  return 'accepted';
}

describe('tool_choice and parallel_tool_calls', () => {
  it('auto parses calls and masks nothing; none masks the call token and parses nothing', () => {
    expect(toolShaping({ tools })).toEqual({ parse: true, single: false });
    expect(toolShaping({ tools: [], tool_choice: 'auto' })).toEqual({ parse: false, single: false });
    const none = toolShaping({ tools, tool_choice: 'none' });
    expect(none.parse).toBe(false);
    expect(none.mask?.([])).toEqual({ ban: new Set([START]) });
  });

  it('constrains required and a named function, refusing what cannot be called', () => {
    const required = toolShaping({ tools, tool_choice: 'required' });
    expect(required).toMatchObject({ parse: true, single: false, grammar: { kind: 'tool_calls', parallel: true } });
    const named = { type: 'function' as const, function: { name: 'calc' } };
    expect(toolShaping({ tools, tool_choice: named })).toMatchObject({ single: true, grammar: { parallel: false } });
    expect(refusal(() => toolShaping({ tools: [], tool_choice: 'required' }))).toMatch(
      /^400 tool_choice: "required" needs tools/,
    );
    const other = { type: 'function' as const, function: { name: 'other' } };
    expect(refusal(() => toolShaping({ tools, tool_choice: other }))).toMatch(/"other", which is not among the tools/);
    const badName = [{ type: 'function', function: { name: '9 lives' } }];
    expect(refusal(() => toolShaping({ tools: badName, tool_choice: 'required' }))).toMatch(/cannot be written/);
  });

  it('reads JSON output as content, never as tool calls', () => {
    const json = toolShaping({ tools, response_format: { type: 'json_object' } });
    expect(json).toMatchObject({ parse: false, grammar: { kind: 'json' } });
  });

  it('without parallel calls, allows only the end of the turn once a call has closed', () => {
    const single = toolShaping({ tools, parallel_tool_calls: false });
    expect(single.single).toBe(true);
    expect(single.mask?.([START, 99, END])).toEqual({ allow: new Set([specialTokenId(END_OF_TURN)]) });
    expect(single.mask?.([START, 99])).toBeNull();
    expect(single.mask?.([END])).toBeNull();
  });

  it('gives every call its own id, and keeps one call where parallel calls are off', () => {
    const text = '<tool_call>calc{"x":1}</tool_call><tool_call>calc{"x":2}</tool_call>';
    const calls = replyToolCalls(parseToolCalls(text).toolCalls, toolShaping({ tools }));
    expect(calls.map((c) => c.id)).toEqual([
      expect.stringMatching(/^chatcmpl-tool-[0-9a-f]{32}$/),
      expect.stringMatching(/^chatcmpl-tool-[0-9a-f]{32}$/),
    ]);
    expect(new Set(calls.map((c) => c.id)).size).toBe(2);
    const again = replyToolCalls(parseToolCalls(text).toolCalls, toolShaping({ tools }));
    expect(again[0]?.id).not.toBe(calls[0]?.id);
    const one = replyToolCalls(parseToolCalls(text).toolCalls, toolShaping({ tools, parallel_tool_calls: false }));
    expect(one.map((c) => c.function.arguments)).toEqual(['{"x":1}']);
  });
});

describe('the request fields', () => {
  it('refuses any field it would not honor, naming it', () => {
    expect(refusal(() => parseRequest(chatRequest, { model: 'm', messages, store: true, metadata: {} }))).toMatch(
      /^400 store, metadata: not supported by the embedded policy server/,
    );
    expect(refusal(() => parseRequest(completionRequest, { model: 'm', prompt: 'x', suffix: 'y' }))).toMatch(
      /^400 suffix: not supported/,
    );
  });

  it('takes text and JSON output, refuses other formats and penalties, and takes the values that ask for nothing', () => {
    const json = { model: 'm', messages, response_format: { type: 'json_object' } };
    expect(refusal(() => parseRequest(chatRequest, json))).toBe('accepted');
    const schema = { type: 'json_schema', json_schema: { name: 'x', schema: {}, strict: true } };
    expect(refusal(() => parseRequest(chatRequest, { ...json, response_format: schema }))).toBe('accepted');
    const grammar = { type: 'grammar', grammar: 'root ::= "a"' };
    expect(refusal(() => parseRequest(chatRequest, { ...json, response_format: grammar }))).toMatch(
      /^400 response_format.type: "grammar" is not supported/,
    );
    expect(refusal(() => parseRequest(chatRequest, { ...json, frequency_penalty: 0.5 }))).toMatch(/frequency/);
    const plain = { model: 'm', messages, response_format: { type: 'text' }, presence_penalty: 0, user: 'u' };
    expect(refusal(() => parseRequest(chatRequest, plain))).toBe('accepted');
  });

  it('takes top_logprobs 0 to 20 with logprobs only', () => {
    const ask = (top_logprobs: number, logprobs?: boolean) => () =>
      parseRequest(chatRequest, { model: 'm', messages, top_logprobs, logprobs });
    expect(refusal(ask(20, true))).toBe('accepted');
    expect(refusal(ask(21, true))).toMatch(/top_logprobs/);
    expect(refusal(ask(2))).toMatch(/top_logprobs.*logprobs/);
  });
});

describe('log-probs as OpenAI shapes them', () => {
  const row = {
    ids: [0xc3, 0xa9, START],
    logprobs: [-0.1, -0.2, -0.3],
    top: [
      [
        { id: 0xc3, logprob: -0.1 },
        { id: 0x41, logprob: -2 },
      ],
      [{ id: 0xa9, logprob: -0.2 }],
      [{ id: 0x41, logprob: -0.01 }],
    ],
  };

  it('gives chat tokens their text, log-prob, bytes and top alternatives', () => {
    const content = chatLogprobs(tokenizer, row);
    expect(content[0]).toEqual({
      token: '\ufffd',
      logprob: -0.1,
      bytes: [0xc3],
      top_logprobs: [
        { token: '\ufffd', logprob: -0.1, bytes: [0xc3] },
        { token: 'A', logprob: -2, bytes: [0x41] },
      ],
    });
    expect(content[2]).toMatchObject({ token: '<tool_call>', bytes: [...Buffer.from('<tool_call>')] });
  });

  it('gives completions a dict of the top tokens per step, the drawn one too', () => {
    expect(completionTopLogprobs(tokenizer, row, 2)).toEqual([
      { '\ufffd': -0.1, A: -2 },
      { '\ufffd': -0.2 },
      { A: -0.01, '<tool_call>': -0.3 },
    ]);
    expect(completionTopLogprobs(tokenizer, row, 0)).toBeNull();
  });
});
