import { describe, expect, it } from 'vitest';
import { ApiRequestError } from '../translation.js';
import type { ResponsesRequest } from './shapes.js';
import { toChat } from './to-chat.js';

const ask = (fields: Partial<ResponsesRequest>) =>
  toChat({ model: 'policy', input: 'hi', ...fields } as ResponsesRequest);

/** The 400 a request gets: its message. */
function refusal(fields: Record<string, unknown>): string {
  try {
    toChat({ model: 'policy', input: 'hi', ...fields } as ResponsesRequest);
  } catch (err) {
    expect(err).toBeInstanceOf(ApiRequestError);
    expect((err as ApiRequestError).status).toBe(400);
    expect((err as ApiRequestError).type).toBe('invalid_request_error');
    return (err as Error).message;
  }
  throw new Error('expected a refusal');
}

const weather = { type: 'function' as const, name: 'weather', description: 'Weather at a place', strict: true };
const weatherTool = { ...weather, parameters: { type: 'object', properties: { city: { type: 'string' } } } };

describe('toChat: a Responses request as the chat request asking the same', () => {
  it('takes a string input as one user message, after the instructions as a system message', () => {
    expect(ask({ instructions: 'Be brief.' })).toEqual({
      model: 'policy',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hi' },
      ],
    });
  });

  it('turns a model turn (reasoning, message, function calls) into ONE assistant message, as a chat harness sends it', () => {
    const chat = ask({
      input: [
        { role: 'developer', content: 'Use tools.' },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Oslo and Rome?' }] },
        { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'Two calls.' }] },
        {
          type: 'message',
          id: 'msg_1',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'Checking.', annotations: [] }],
        },
        { type: 'function_call', id: 'fc_1', call_id: 'call_a', name: 'weather', arguments: '{"city":"Oslo"}' },
        { type: 'function_call', id: 'fc_2', call_id: 'call_b', name: 'weather', arguments: '{"city": "Rome"}' },
        { type: 'function_call_output', call_id: 'call_a', output: 'rain' },
        { type: 'function_call_output', call_id: 'call_b', output: [{ type: 'input_text', text: 'sun' }] },
        { role: 'assistant', content: 'Oslo: rain. Rome: sun.' },
        { role: 'user', content: 'Thanks' },
      ],
    });
    expect(chat.messages).toEqual([
      { role: 'system', content: 'Use tools.' },
      { role: 'user', content: [{ type: 'text', text: 'Weather in Oslo and Rome?' }] },
      {
        role: 'assistant',
        reasoning_content: 'Two calls.',
        content: 'Checking.',
        tool_calls: [
          { id: 'call_a', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } },
          { id: 'call_b', type: 'function', function: { name: 'weather', arguments: '{"city": "Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_a', content: 'rain' },
      { role: 'tool', tool_call_id: 'call_b', content: 'sun' },
      { role: 'assistant', content: 'Oslo: rain. Rome: sun.' },
      { role: 'user', content: 'Thanks' },
    ]);
  });

  it('gives a turn of only function calls a null content, and starts a new turn after a tool result', () => {
    const call = (id: string) => ({ type: 'function_call' as const, call_id: id, name: 'weather', arguments: '{}' });
    const { messages } = ask({
      input: [call('a'), { type: 'function_call_output', call_id: 'a', output: 'x' }, call('b')],
    });
    expect(messages.map((m) => [m.role, 'tool_calls' in m ? m.tool_calls?.length : 0])).toEqual([
      ['assistant', 1],
      ['tool', 0],
      ['assistant', 1],
    ]);
    expect(messages[0]).toMatchObject({ content: null });
  });

  it('reads a reasoning item from its summary when it has no content', () => {
    const { messages } = ask({
      input: [
        { role: 'user', content: 'q' },
        { type: 'reasoning', id: 'rs', summary: [{ type: 'summary_text', text: 'thought' }] },
        { role: 'assistant', content: 'a' },
      ],
    });
    expect(messages[1]).toEqual({ role: 'assistant', reasoning_content: 'thought', content: 'a' });
  });

  it('translates each generation field to its chat field', () => {
    const chat = ask({
      tools: [weatherTool],
      tool_choice: { type: 'function', name: 'weather' },
      parallel_tool_calls: false,
      max_output_tokens: 12,
      temperature: 0.5,
      top_p: 0.9,
      top_logprobs: 3,
      stream: true,
      text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true } },
      user: 'u1',
      metadata: { run: 'r' },
      store: false,
      truncation: 'disabled',
      include: ['reasoning.encrypted_content'],
    });
    expect(chat).toEqual({
      model: 'policy',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [
        {
          type: 'function',
          function: {
            name: 'weather',
            description: 'Weather at a place',
            parameters: weatherTool.parameters,
            strict: true,
          },
        },
      ],
      tool_choice: { type: 'function', function: { name: 'weather' } },
      parallel_tool_calls: false,
      max_tokens: 12,
      temperature: 0.5,
      top_p: 0.9,
      logprobs: true,
      top_logprobs: 3,
      response_format: { type: 'json_schema', json_schema: { name: 'out', schema: { type: 'object' }, strict: true } },
      user: 'u1',
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(ask({ include: ['message.output_text.logprobs'] })).toMatchObject({ logprobs: true });
    expect(ask({ text: { format: { type: 'json_object' } } })).toMatchObject({
      response_format: { type: 'json_object' },
    });
    expect(ask({ reasoning: { effort: 'low' } })).toMatchObject({ reasoning_effort: 'low' });
    for (const mode of ['auto', 'none', 'required'] as const) expect(ask({ tool_choice: mode }).tool_choice).toBe(mode);
  });

  it('refuses what it cannot express, naming the field or part and the fix', () => {
    expect(
      refusal({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png' }] }] }),
    ).toMatch(/input\[0\]\.content\[0\]: content part type "input_image" is not supported; the policy takes text only/);
    expect(refusal({ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] })).toMatch(
      /"input_file"/,
    );
    expect(
      refusal({ input: [{ type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image' }] }] }),
    ).toMatch(/input\[0\]\.output\[0\]: content part type "input_image"/);
    expect(refusal({ tools: [{ type: 'web_search' }] })).toMatch(
      /tools\[0\]: tools of type "web_search" are not supported/,
    );
    expect(refusal({ tools: [weatherTool, { type: 'mcp', server_label: 's' }] })).toMatch(/tools\[1\].*"mcp"/);
    expect(refusal({ tool_choice: { type: 'file_search' } })).toMatch(/tool_choice/);
    expect(refusal({ previous_response_id: 'resp_1' })).toMatch(
      /previous_response_id: this server keeps no responses \(the gateway does\)/,
    );
    expect(refusal({ conversation: 'conv_1' })).toMatch(/conversation: this server keeps no conversations/);
    expect(refusal({ background: true })).toMatch(/background/);
    expect(refusal({ truncation: 'auto' })).toMatch(/truncation: "auto" would drop input items/);
    expect(refusal({ text: { verbosity: 'low' } })).toMatch(/text\.verbosity/);
    expect(refusal({ include: ['everything'] })).toMatch(/include: "everything"/);
    expect(refusal({ frequency_penalty: 1 })).toMatch(/frequency_penalty: not a Responses API field/);
    expect(refusal({ input: [{ type: 'item_reference', id: 'msg_1' }] })).toMatch(/item_reference.*keeps none/);
    expect(refusal({ input: [{ type: 'computer_call_output', call_id: 'c' }] })).toMatch(/"computer_call_output"/);
    expect(refusal({ input: [{ type: 'reasoning', summary: [], encrypted_content: 'gAAA' }] })).toMatch(
      /only encrypted_content/,
    );
    expect(refusal({ input: [{ type: 'function_call', call_id: 'c', name: 'f' }] })).toMatch(/string arguments/);
    expect(refusal({ input: undefined })).toMatch(/^input: send a string/);
    expect(refusal({ model: undefined })).toMatch(/^model:/);
  });

  it('takes bookkeeping fields without sending them on, and nulls as absent', () => {
    const plain = ask({});
    expect(
      ask({
        store: true,
        metadata: { a: 'b' },
        service_tier: 'auto',
        prompt_cache_key: 'k',
        safety_identifier: 's',
        previous_response_id: null,
        background: false,
        temperature: null,
      }),
    ).toEqual(plain);
  });
});
