import fc from 'fast-check';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { describe, expect, it } from 'vitest';
import { fromChat } from './from-chat.js';
import { responsesTranslation } from './index.js';
import type { ResponsesAnswer, ResponsesRequest } from './shapes.js';
import { ResponsesStream } from './stream-from-chat.js';

const request: ResponsesRequest = { model: 'policy', input: 'hi', stream: true };
type Delta = ChatCompletionChunk.Choice['delta'] & { reasoning_content?: string };
type Event = Record<string, unknown> & { type: string; sequence_number: number };

function chunk(delta: Delta, finish: ChatCompletionChunk.Choice['finish_reason'] = null): ChatCompletionChunk {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1700000000,
    model: 'policy',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  };
}
const usageChunk: ChatCompletionChunk = {
  ...chunk({}),
  choices: [],
  usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
};

/** The stream's SSE text as its events, each frame checked to name its event's type. */
function events(
  chunks: ChatCompletionChunk[],
  stream = new ResponsesStream(request),
): { events: Event[]; stream: ResponsesStream } {
  const text = chunks.map((c) => stream.chunk(c)).join('') + stream.end();
  expect(text.endsWith('\n\n')).toBe(true);
  expect(text).not.toContain('[DONE]');
  const parsed = text
    .split('\n\n')
    .filter(Boolean)
    .map((frame) => {
      const [eventLine, dataLine] = frame.split('\n');
      const event = JSON.parse((dataLine ?? '').replace(/^data: /, '')) as Event;
      expect(eventLine).toBe(`event: ${event.type}`);
      return event;
    });
  return { events: parsed, stream };
}

/** An answer with its random ids replaced by their kinds, to compare two answers to the same chat. */
function withoutIds(answer: ResponsesAnswer) {
  return JSON.parse(JSON.stringify(answer).replace(/"(resp|msg|fc|rs)_[0-9a-f]{32}"/g, '"$1"')) as unknown;
}

describe('streamFromChat: chat chunks as Responses events', () => {
  it('tells text and a tool call as typed events, numbered from 0, ending with the whole answer', () => {
    const { events: told, stream } = events([
      chunk({ role: 'assistant', content: '' }),
      chunk({ content: 'Hel' }),
      chunk({ content: 'lo' }),
      chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] }, 'tool_calls'),
      usageChunk,
    ]);
    expect(told.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(told.map((e) => e.sequence_number)).toEqual(told.map((_, i) => i));
    const answer = stream.answer();
    expect(told[0]).toMatchObject({ response: { id: answer.id, status: 'in_progress', output: [] } });
    expect(told.at(-1)).toMatchObject({ response: answer });
    const [message, call] = answer.output;
    expect(told.filter((e) => e.output_index === 0).every((e) => e.item_id ?? (e.item as { id: string }).id)).toBe(
      true,
    );
    for (const e of told.filter((e) => e.output_index === 0 && e.item_id)) expect(e.item_id).toBe(message?.id);
    for (const e of told.filter((e) => e.output_index === 1 && e.item_id)) expect(e.item_id).toBe(call?.id);
    expect(told[12]).toMatchObject({ name: 'f', arguments: '{"a":1}' });
    expect(answer.output).toEqual([
      {
        id: message?.id,
        type: 'message',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: 'Hello', annotations: [] }],
      },
      { id: call?.id, type: 'function_call', status: 'completed', call_id: 'call_1', name: 'f', arguments: '{"a":1}' },
    ]);
    expect(answer.usage).toMatchObject({ input_tokens: 3, output_tokens: 4, total_tokens: 7 });
  });

  it('tells reasoning as a reasoning item before the text, and a cut-off answer as incomplete', () => {
    const { events: told, stream } = events([
      chunk({ reasoning_content: 'think' }),
      chunk({ content: 'ans' }, 'length'),
    ]);
    expect(told.map((e) => e.type).slice(2, 8)).toEqual([
      'response.output_item.added',
      'response.content_part.added',
      'response.reasoning_text.delta',
      'response.reasoning_text.done',
      'response.content_part.done',
      'response.output_item.done',
    ]);
    expect(told.at(-1)).toMatchObject({ type: 'response.incomplete', response: { status: 'incomplete' } });
    const answer = stream.answer();
    expect(answer.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(answer.output.map((item) => [item.type, 'status' in item ? item.status : undefined])).toEqual([
      ['reasoning', 'completed'],
      ['message', 'incomplete'],
    ]);
  });

  it('ends a failed stream with response.failed carrying the error', () => {
    const stream = responsesTranslation.streamFromChat(request) as ResponsesStream;
    const text = stream.chunk(chunk({ content: 'a' })) + stream.failed('generation failed: boom');
    const last = JSON.parse(
      text
        .trim()
        .split('\n')
        .at(-1)!
        .replace(/^data: /, ''),
    ) as Event;
    expect(last).toMatchObject({
      type: 'response.failed',
      response: { status: 'failed', error: { code: 'server_error', message: 'generation failed: boom' } },
    });
    expect(stream.end()).toBe('');
  });

  it('splits any text into any chunks: the deltas join to the text, and the answer is the unstreamed one', () => {
    const logprob = (token: string) => ({ token, logprob: -1, bytes: [...Buffer.from(token)], top_logprobs: [] });
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'grapheme', maxLength: 6 }), { maxLength: 8 }),
        fc.boolean(),
        fc.constantFrom('stop', 'length') as fc.Arbitrary<'stop' | 'length'>,
        (pieces, withLogprobs, finish) => {
          const chunks: ChatCompletionChunk[] = pieces.map((piece) => ({
            ...chunk({ content: piece }),
            choices: [
              {
                index: 0,
                delta: { content: piece },
                finish_reason: null,
                logprobs: withLogprobs ? { content: [logprob(piece)], refusal: null } : null,
              },
            ],
          }));
          chunks.push({
            ...chunk({}, finish),
            choices: [
              {
                index: 0,
                delta: {},
                finish_reason: finish,
                logprobs: withLogprobs ? { content: [logprob('<end>')], refusal: null } : null,
              },
            ],
          });
          const { events: told, stream } = events([...chunks, usageChunk]);
          const text = pieces.join('');
          const deltas = told.filter((e) => e.type === 'response.output_text.delta');
          expect(deltas.map((e) => e.delta).join('')).toBe(text);
          expect(told.map((e) => e.sequence_number)).toEqual(told.map((_, i) => i));
          const whole = fromChat(
            {
              created: 1700000000,
              model: 'policy',
              choices: [
                {
                  message: { content: text },
                  finish_reason: finish,
                  logprobs: withLogprobs ? { content: [...pieces, '<end>'].map(logprob) } : null,
                },
              ],
              usage: usageChunk.usage,
            },
            request,
          );
          expect(withoutIds(stream.answer())).toEqual(withoutIds(whole));
          expect(told.at(-1)?.response).toEqual(stream.answer());
        },
      ),
    );
  });
});
