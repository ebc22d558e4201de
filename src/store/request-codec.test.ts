import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeRequest, encodeRequest, type ConversationBase } from './request-codec.js';

const message = fc.record({
  role: fc.constantFrom('system', 'user', 'assistant', 'tool'),
  content: fc.string({ maxLength: 20 }),
});

describe('request codec', () => {
  it('round-trips any sequence of requests, whatever their conversations share', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            keep: fc.nat({ max: 12 }),
            added: fc.array(message, { maxLength: 4 }),
            extra: fc.option(fc.boolean()),
          }),
          { minLength: 1, maxLength: 10 },
        ),
        (steps) => {
          const stored = new Map<string, ReturnType<typeof encodeRequest>>();
          const itemsOf = (id: string): string[] =>
            decodeRequest({ ...stored.get(id)!, sentPatch: stored.get(id)!.sentPatch }, itemsOf).items ?? [];
          let previous: unknown[] = [];
          let base: ConversationBase | undefined;
          steps.forEach((step, i) => {
            const messages = [...previous.slice(0, step.keep), ...step.added];
            previous = messages;
            const received: Record<string, unknown> = {
              model: 'm',
              messages,
              ...(step.extra !== null && { flag: step.extra }),
            };
            const sent: Record<string, unknown> = { ...received, model: 'backend-model', return_token_ids: true };
            delete sent.flag;
            const encoded = encodeRequest(received, sent, base);
            stored.set(`c${i}`, encoded);
            if (encoded.items) base = { callId: `c${i}`, items: encoded.items };
            const decoded = decodeRequest(encoded, itemsOf);
            expect(decoded.received).toEqual(received);
            expect(decoded.sent).toEqual(sent);
          });
        },
      ),
      { numRuns: 200 },
    );
  });

  it('stores only the new messages of a conversation that grew', () => {
    const first = { model: 'm', messages: [{ role: 'user', content: 'a'.repeat(1000) }] };
    const a = encodeRequest(first, first, undefined);
    const second = {
      ...first,
      messages: [...first.messages, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'next' }],
    };
    const b = encodeRequest(second, second, { callId: 'a', items: a.items! });
    expect(b.conversation).toEqual({ field: 'messages', ref: 'a', prefix: 1 });
    expect(b.received.length).toBeLessThan(200);
    expect(JSON.parse(b.sentPatch)).toEqual({ set: {}, unset: [] });
  });
});
