import { describe, expect, it } from 'vitest';
import { responsesErrorBody, responsesTranslation } from './index.js';
import { assistantMessageOf, fromChat, type ChatAnswer } from './from-chat.js';
import type { ResponsesRequest } from './shapes.js';

const request: ResponsesRequest = { model: 'policy', input: 'hi', instructions: 'Be brief.', max_output_tokens: 20 };

function chatAnswer(message: ChatAnswer['choices'][number]['message'], finish = 'stop'): ChatAnswer {
  return {
    created: 1700000000,
    model: 'policy',
    choices: [{ message, finish_reason: finish, logprobs: null }],
    usage: { prompt_tokens: 7, completion_tokens: 5, total_tokens: 12 },
  };
}

describe('fromChat: a chat completion as a Responses answer', () => {
  it('gives reasoning, text and function calls as output items in model order, echoing the request', () => {
    const chat = {
      ...chatAnswer({
        content: 'Checking.',
        reasoning_content: 'Look it up.',
        tool_calls: [{ id: 'chatcmpl-tool-1', type: 'function', function: { name: 'weather', arguments: '{"c":1}' } }],
      }),
      prompt_token_ids: [1, 2],
    };
    const answer = fromChat(chat, request);
    expect(answer).toEqual({
      id: expect.stringMatching(/^resp_[0-9a-f]{32}$/),
      object: 'response',
      created_at: 1700000000,
      status: 'completed',
      background: false,
      error: null,
      incomplete_details: null,
      instructions: 'Be brief.',
      max_output_tokens: 20,
      metadata: {},
      model: 'policy',
      output: [
        {
          id: expect.stringMatching(/^rs_[0-9a-f]{32}$/),
          type: 'reasoning',
          summary: [],
          content: [{ type: 'reasoning_text', text: 'Look it up.' }],
          status: 'completed',
        },
        {
          id: expect.stringMatching(/^msg_[0-9a-f]{32}$/),
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'Checking.', annotations: [] }],
        },
        {
          id: expect.stringMatching(/^fc_[0-9a-f]{32}$/),
          type: 'function_call',
          status: 'completed',
          call_id: 'chatcmpl-tool-1',
          name: 'weather',
          arguments: '{"c":1}',
        },
      ],
      parallel_tool_calls: true,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      service_tier: 'default',
      store: true,
      temperature: null,
      text: { format: { type: 'text' } },
      tool_choice: 'auto',
      tools: [],
      top_logprobs: 0,
      top_p: null,
      truncation: 'disabled',
      usage: {
        input_tokens: 7,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 5,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 12,
      },
    });
    expect(JSON.stringify(answer)).not.toMatch(/token_ids|output_text"?:/);
  });

  it('is incomplete at the length limit, and carries log-probs (with bytes) when the chat answer had them', () => {
    const chat = chatAnswer({ content: 'ab' }, 'length');
    chat.choices[0]!.logprobs = {
      content: [
        { token: 'a', logprob: -0.5, bytes: [97], top_logprobs: [{ token: 'a', logprob: -0.5, bytes: [97] }] },
        { token: 'b', logprob: -1, bytes: null, top_logprobs: [] },
      ],
    };
    const answer = fromChat(chat, request);
    expect(answer.status).toBe('incomplete');
    expect(answer.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(answer.output[0]).toMatchObject({
      status: 'incomplete',
      content: [
        {
          text: 'ab',
          logprobs: [
            { token: 'a', logprob: -0.5, bytes: [97], top_logprobs: [{ token: 'a', logprob: -0.5, bytes: [97] }] },
            { token: 'b', logprob: -1, bytes: [], top_logprobs: [] },
          ],
        },
      ],
    });
  });

  it('gives no message item for a turn of only tool calls, and echoes the tools asked with', () => {
    const tools = [{ type: 'function' as const, name: 'f', parameters: null, strict: null }];
    const answer = fromChat(
      chatAnswer({ content: '', tool_calls: [{ id: 'c', function: { name: 'f', arguments: '{}' } }] }),
      { ...request, tools, tool_choice: 'none', temperature: 0 },
    );
    expect(answer.output.map((item) => item.type)).toEqual(['function_call']);
    expect(answer).toMatchObject({ tools, tool_choice: 'none', temperature: 0 });
  });

  it('reads back the chat assistant message an answer holds', () => {
    const message = {
      content: 'Checking.',
      reasoning_content: 'Look it up.',
      tool_calls: [{ id: 'c1', type: 'function' as const, function: { name: 'weather', arguments: '{}' } }],
    };
    expect(assistantMessageOf(fromChat(chatAnswer(message), request))).toEqual({ role: 'assistant', ...message });
    expect(responsesTranslation.assistantMessageOf(fromChat(chatAnswer({ content: null }), request))).toEqual({
      role: 'assistant',
      content: null,
    });
  });

  it("answers refusals in OpenAI's error shape", () => {
    expect(responsesErrorBody(400, 'invalid_request_error', 'input: bad')).toEqual({
      error: { message: 'input: bad', type: 'invalid_request_error', param: null, code: null },
    });
  });
});
