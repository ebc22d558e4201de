import { describe, expect, it } from 'vitest';
import { qwen3 } from '../../test/helpers/qwen3.js';
import type { CallRecord } from '../store/trace-store.js';
import { toMergeCalls } from './retokenize.js';

const request = { model: 'Qwen/Qwen3-0.6B', messages: [{ role: 'user', content: 'What is 40+2?' }] };
const reply = { role: 'assistant', content: 'It is 42.' };

function record(overrides: Partial<CallRecord>): CallRecord {
  return {
    id: 'c1',
    rolloutId: 'r',
    attempt: 1,
    seq: 1,
    endpoint: 'chat.completions',
    policyVersion: 'v1',
    backendUrl: 'http://b/v1',
    stream: false,
    requestReceived: request,
    requestSent: request,
    startedAt: 0,
    status: 'ok',
    response: { choices: [{ index: 0, message: reply, finish_reason: 'stop' }] },
    promptIds: qwen3.promptIds(request),
    choices: [{ completionIds: qwen3.completionIds(request, reply), logprobs: [-0.1], finishReason: 'stop' }],
    ...overrides,
  };
}

describe('toMergeCalls', () => {
  it('uses engine ids as they are and finds no drift when re-rendering agrees', () => {
    const { calls, drift } = toMergeCalls([record({})], qwen3);
    expect(drift).toEqual({ compared: 1, drifted: 0, retokenized: 0, unusable: 0 });
    expect(calls[0]?.choices[0]?.logprobs).toEqual([-0.1]);
  });

  it('counts drift when the engine spelled the same text with other ids', () => {
    const rendered = qwen3.promptIds(request);
    const text = qwen3.decode(rendered);
    // The question spelled one character at a time: what a different tokenizer revision might produce.
    const question = 'What is 40+2?';
    const [before, after] = text.split(question) as [string, string];
    const engineIds = [
      ...qwen3.encode(before),
      ...[...question].flatMap((c) => qwen3.encode(c)),
      ...qwen3.encode(after),
    ];
    expect(qwen3.decode(engineIds)).toBe(text);
    const { drift } = toMergeCalls([record({ promptIds: engineIds })], qwen3);
    expect(drift).toMatchObject({ compared: 1, drifted: 1 });
  });

  it('re-renders a call the backend returned without ids, with the model template', () => {
    const { calls, drift } = toMergeCalls(
      [record({ promptIds: null, choices: [{ completionIds: null, logprobs: null, finishReason: 'stop' }] })],
      qwen3,
    );
    expect(drift).toEqual({ compared: 0, drifted: 0, retokenized: 1, unusable: 0 });
    expect(calls[0]?.promptIds).toEqual(qwen3.promptIds(request));
    expect(qwen3.decode(calls[0]?.choices[0]?.completionIds ?? [])).toBe('<think>\n\n</think>\n\nIt is 42.<|im_end|>');
    expect(calls[0]?.choices[0]?.logprobs).toBeNull();
  });

  it('leaves out failed calls, and calls without ids when no tokenizer is configured', () => {
    const { calls, drift } = toMergeCalls(
      [record({ status: 'error' }), record({ id: 'c2', promptIds: null })],
      undefined,
    );
    expect(calls).toEqual([]);
    expect(drift.unusable).toBe(2);
  });
});

describe('toMergeCalls on calls the gateway redacted', () => {
  it('re-renders a redacted prompt, and never trains on a reply whose text was redacted', () => {
    const leakyRequest = { ...request, messages: [{ role: 'user', content: 'my key is [REDACTED:openai-key]' }] };
    const withheld = { promptIds: null, choices: [{ completionIds: null, logprobs: null, finishReason: 'stop' }] };
    const { calls, drift } = toMergeCalls(
      [
        // The request had the secret, the reply did not: the prompt is re-rendered from the redacted text.
        record({ id: 'prompt-only', requestSent: leakyRequest, ...withheld }),
        // The reply had it: re-rendering "[REDACTED:…]" would teach the policy to write it.
        record({
          id: 'reply',
          requestSent: leakyRequest,
          ...withheld,
          response: {
            choices: [
              {
                index: 0,
                message: { role: 'assistant', content: 'Echo: [REDACTED:openai-key]' },
                finish_reason: 'stop',
              },
            ],
          },
        }),
      ],
      qwen3,
    );
    expect(calls.map((c) => c.callId)).toEqual(['prompt-only']);
    expect(qwen3.decode(calls[0]?.promptIds ?? [])).toContain('my key is [REDACTED:openai-key]');
    expect(drift).toMatchObject({ retokenized: 1, unusable: 1 });
  });
});

describe('toMergeCalls on messages sent as content parts', () => {
  const asParts = {
    ...request,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is ' },
          { type: 'text', text: '40+2?' },
        ],
      },
    ],
  };
  const joined = { ...request, messages: [{ role: 'user', content: 'What is \n40+2?' }] };
  const partsReply = { role: 'assistant', content: [{ type: 'text', text: 'It is 42.' }] };

  it('renders text parts as vLLM does: the ids of the string contents, parts joined by a newline', () => {
    const { calls, drift } = toMergeCalls(
      [
        // The engine rendered the parts itself: re-rendering them here agrees.
        record({ id: 'engine', requestSent: asParts, promptIds: qwen3.promptIds(joined) }),
        record({
          id: 'no-ids',
          requestSent: asParts,
          response: { choices: [{ index: 0, message: partsReply, finish_reason: 'stop' }] },
          promptIds: null,
        }),
      ],
      qwen3,
    );
    expect(drift).toEqual({ compared: 1, drifted: 0, retokenized: 1, unusable: 0 });
    expect(calls[1]?.promptIds).toEqual(qwen3.promptIds(joined));
    expect(calls[1]?.choices[0]?.completionIds).toEqual(qwen3.completionIds(joined, reply));
  });

  it('leaves out a call with an image part it cannot re-render, and compares no drift for one with ids', () => {
    const withImage = {
      ...request,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AA' } }] }],
    };
    const { calls, drift } = toMergeCalls(
      [
        record({ id: 'engine', requestSent: withImage }),
        record({ id: 'no-ids', requestSent: withImage, promptIds: null }),
      ],
      qwen3,
    );
    expect(calls.map((c) => c.callId)).toEqual(['engine']);
    expect(drift).toEqual({ compared: 0, drifted: 0, retokenized: 0, unusable: 1 });
  });
});

describe('toMergeCalls on the Responses and Messages APIs', () => {
  const question = 'What is 40+2?';
  const responsesRequest = { model: 'production', input: question };
  const responseAnswer = {
    id: 'resp_1',
    object: 'response',
    status: 'completed',
    output: [
      {
        type: 'message',
        id: 'msg_1',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: 'It is 42.', annotations: [] }],
      },
    ],
  };
  const noIds = { promptIds: null, choices: [{ completionIds: null, logprobs: null, finishReason: null }] };

  it('re-renders a Responses call a backend served itself (sent as it came) through the translation', () => {
    const sent = { ...responsesRequest, model: 'Qwen/Qwen3-0.6B' };
    const { calls, drift } = toMergeCalls(
      [
        record({
          endpoint: 'responses',
          requestReceived: responsesRequest,
          requestSent: sent,
          response: responseAnswer,
          ...noIds,
        }),
      ],
      qwen3,
    );
    expect(drift).toMatchObject({ retokenized: 1, unusable: 0 });
    expect(calls[0]?.promptIds).toEqual(qwen3.promptIds(request));
    expect(qwen3.decode(calls[0]?.choices[0]?.completionIds ?? [])).toContain('It is 42.<|im_end|>');
  });

  it('renders a translated call from the chat request the backend was sent', () => {
    const { calls, drift } = toMergeCalls(
      [
        record({
          endpoint: 'responses',
          requestReceived: responsesRequest,
          requestSent: request,
          response: responseAnswer,
          ...noIds,
        }),
      ],
      qwen3,
    );
    expect(drift).toMatchObject({ retokenized: 1 });
    expect(calls[0]?.promptIds).toEqual(qwen3.promptIds(request));
  });

  it('re-renders a Messages call a backend served itself', () => {
    const received = { model: 'production', max_tokens: 16, messages: [{ role: 'user', content: question }] };
    const answer = {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      content: [{ type: 'text', text: 'It is 42.' }],
      stop_reason: 'end_turn',
    };
    const { calls, drift } = toMergeCalls(
      [
        record({
          endpoint: 'messages',
          requestReceived: received,
          requestSent: { ...received, model: 'Qwen/Qwen3-0.6B' },
          response: answer,
          ...noIds,
        }),
      ],
      qwen3,
    );
    expect(drift).toMatchObject({ retokenized: 1 });
    expect(calls[0]?.promptIds).toEqual(qwen3.promptIds(request));
  });

  it('leaves out a chained Responses call sent as it came: only the backend knew its history', () => {
    const chained = { ...responsesRequest, previous_response_id: 'resp_0' };
    const { drift } = toMergeCalls(
      [
        record({
          endpoint: 'responses',
          requestReceived: chained,
          requestSent: chained,
          response: responseAnswer,
          ...noIds,
        }),
      ],
      qwen3,
    );
    expect(drift).toMatchObject({ retokenized: 0, unusable: 1 });
  });
});
