import { describe, expect, it } from 'vitest';
import type { CallFinish, ShadowCallRecord, TraceStore } from '../store/trace-store.js';
import { DEFAULT_REDACTION_RULES } from './redact.js';
import { RedactingStore } from './redacting-store.js';

describe('RedactingStore', () => {
  it("redacts a call's error message and a shadow call's, which the proxy does not", async () => {
    const written: unknown[] = [];
    const inner = {
      finishCall: async (_id: string, result: CallFinish) => void written.push(result.errorMessage),
      recordShadowCall: async (call: ShadowCallRecord) => void written.push(call.errorMessage),
    } as unknown as TraceStore;
    const store = new RedactingStore(inner, DEFAULT_REDACTION_RULES);
    const message = '400: invalid api key sk-abcdefghijklmnopqrstuv';
    await store.finishCall('c', { errorMessage: message } as CallFinish);
    await store.recordShadowCall({ errorMessage: message } as ShadowCallRecord);
    expect(written).toEqual([
      '400: invalid api key [REDACTED:openai-key]',
      '400: invalid api key [REDACTED:openai-key]',
    ]);
  });
});
