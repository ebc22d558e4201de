import type { RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages/messages';
import fc from 'fast-check';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { describe, expect, it } from 'vitest';
import { chatCompletion } from '../../../test/helpers/chat-completions.js';
import { messagesTranslation } from './index.js';

const request = { model: 'm', max_tokens: 8, messages: [], stream: true };

interface Reply {
  reasoning: string;
  content: string;
  calls: Array<{ id: string; name: string; arguments: string }>;
  finish: 'stop' | 'length' | 'tool_calls';
  stop: string | null;
}

/** Splits text at the given cut points (sorted, deduplicated, in range). */
function pieces(text: string, cuts: number[]): string[] {
  const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  return [0, ...at, text.length].slice(1).map((end, i, all) => text.slice(i === 0 ? 0 : all[i - 1], end));
}

/** The reply as chat chunks, each text cut where `cuts` says (vLLM's shape: role first, usage last). */
function chunksOf(reply: Reply, cuts: number[]): ChatCompletionChunk[] {
  const chunk = (delta: object, extra: object = {}) =>
    ({
      id: 'c',
      object: 'chat.completion.chunk',
      created: 0,
      // The model that answers, named in the answer rather than the request's 'm' (as fromChat does).
      model: 'policy',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }],
    }) as unknown as ChatCompletionChunk;
  const out = [chunk({ role: 'assistant', content: '' })];
  for (const p of pieces(reply.reasoning, cuts)) if (p) out.push(chunk({ reasoning_content: p }));
  for (const p of pieces(reply.content, cuts)) if (p) out.push(chunk({ content: p }));
  reply.calls.forEach((call, index) => {
    const [first = '', ...rest] = pieces(call.arguments, cuts);
    out.push(
      chunk({
        tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: first } }],
      }),
    );
    for (const p of rest) out.push(chunk({ tool_calls: [{ index, function: { arguments: p } }] }));
  });
  out.push(chunk({}, { finish_reason: reply.finish, stop_reason: reply.stop }));
  out.push({ ...chunk({}), choices: [], usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 } });
  return out;
}

function eventsOf(sse: string): RawMessageStreamEvent[] {
  return sse
    .split('\n\n')
    .filter(Boolean)
    .map((frame) => {
      const [event, data] = frame.split('\n');
      const parsed = JSON.parse((data ?? '').slice('data: '.length)) as RawMessageStreamEvent;
      expect(event).toBe(`event: ${parsed.type}`);
      return parsed;
    });
}

const replies = fc.record({
  reasoning: fc.string(),
  content: fc.string(),
  calls: fc.array(
    fc.record({
      id: fc.stringMatching(/^call_[a-z0-9]{1,8}$/),
      name: fc.constantFrom('calc', 'search'),
      arguments: fc.oneof(
        fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })).map((o) => JSON.stringify(o)),
        fc.string(),
      ),
    }),
    { maxLength: 3 },
  ),
  finish: fc.constantFrom('stop' as const, 'length' as const),
  stop: fc.option(fc.constantFrom('END', '\n\n')),
});

describe('a streamed chat completion as Messages events', () => {
  it('gives the same Message as the whole completion, however it is cut', () => {
    fc.assert(
      fc.property(replies, fc.array(fc.nat(40), { maxLength: 6 }), (generated, cuts) => {
        const reply: Reply = { ...generated, finish: generated.calls.length > 0 ? 'tool_calls' : generated.finish };
        const translator = messagesTranslation.streamFromChat(request);
        const sse =
          chunksOf(reply, cuts)
            .map((c) => translator.chunk(c))
            .join('') + translator.end();
        const whole = messagesTranslation.fromChat(
          chatCompletion(
            {
              content: reply.content || null,
              ...(reply.reasoning && { reasoning_content: reply.reasoning }),
              ...(reply.calls.length > 0 && {
                tool_calls: reply.calls.map((c) => ({
                  id: c.id,
                  type: 'function',
                  function: { name: c.name, arguments: c.arguments },
                })),
              }),
            },
            reply.finish,
            reply.stop,
          ),
          request,
        );
        const answer = translator.answer();
        expect({ ...answer, id: '' }).toEqual({ ...whole, id: '' });

        // The events rebuild that answer: blocks indexed in order, deltas concatenating to each block.
        const events = eventsOf(sse);
        expect(events[0]?.type).toBe('message_start');
        expect(events.at(-1)?.type).toBe('message_stop');
        const rebuilt: Array<Record<string, unknown>> = [];
        let json = '';
        for (const event of events) {
          if (event.type === 'content_block_start') {
            expect(event.index).toBe(rebuilt.length);
            rebuilt.push({ ...event.content_block });
            json = '';
          }
          if (event.type === 'content_block_delta') {
            const block = rebuilt[event.index] as Record<string, string>;
            if (event.delta.type === 'text_delta') block.text += event.delta.text;
            if (event.delta.type === 'thinking_delta') block.thinking += event.delta.thinking;
            if (event.delta.type === 'signature_delta') block.signature = event.delta.signature;
            if (event.delta.type === 'input_json_delta') json += event.delta.partial_json;
          }
          if (event.type === 'content_block_stop' && rebuilt[event.index]?.type === 'tool_use')
            (rebuilt[event.index] as Record<string, unknown>).input = JSON.parse(json);
          if (event.type === 'message_delta') {
            expect(event.delta.stop_reason).toBe(answer.stop_reason);
            expect(event.delta.stop_sequence).toBe(answer.stop_sequence);
            expect(event.usage.output_tokens).toBe(3);
          }
        }
        expect(rebuilt).toEqual(answer.content);
        expect(sse).not.toMatch(/\[DONE\]|token_ids/);
      }),
    );
  });

  it('pings after message_start, as Anthropic does', () => {
    const translator = messagesTranslation.streamFromChat(request);
    const sse = translator.chunk(
      chunksOf({ reasoning: '', content: 'hi', calls: [], finish: 'stop', stop: null }, [])[0]!,
    );
    expect(sse).toMatch(/^event: message_start\ndata: .*\n\nevent: ping\ndata: {"type":"ping"}\n\n$/);
  });
});
