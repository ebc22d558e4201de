import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SqliteTraceStore } from '../store/sqlite-store.js';
import type { ProxiedCall } from './proxied-call.js';
import { ResponseChains } from './response-chains.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-response-chains-'));
const stores: SqliteTraceStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

function chained(body: Record<string, unknown>): ProxiedCall {
  return {
    rolloutId: 'r1',
    attempt: 1,
    endpoint: 'responses',
    body: { model: 'production', ...body },
    text: JSON.stringify(body),
    headers: {},
    signal: new AbortController().signal,
  };
}

const answer = {
  id: 'resp_1',
  output: [{ type: 'function_call', call_id: 'call_1', name: 'calc', arguments: '{"x":"2+2"}' }],
};

describe('previous_response_id kept by the gateway', () => {
  it('expands a chain from the answer it remembered, without reading the journal', async () => {
    const store = new SqliteTraceStore(path.join(dir, 'remembered.sqlite'));
    stores.push(store);
    const reads = vi.spyOn(store, 'listCalls');
    const chains = new ResponseChains(store);
    chains.answered({ model: 'production' }, 'What is 2+2?', answer);
    const output = { type: 'function_call_output', call_id: 'call_1', output: '4' };
    const next = await chains.expanded(chained({ previous_response_id: 'resp_1', input: [output] }));
    expect(next.input).toEqual([{ type: 'message', role: 'user', content: 'What is 2+2?' }, ...answer.output, output]);
    expect(next).not.toHaveProperty('previous_response_id');
    expect(reads).not.toHaveBeenCalled();
  });

  it('keeps no answer whose request said store: false, and names the id it cannot find', async () => {
    const store = new SqliteTraceStore(path.join(dir, 'unstored.sqlite'));
    stores.push(store);
    const chains = new ResponseChains(store);
    chains.answered({ model: 'production', store: false }, 'hi', answer);
    await expect(chains.expanded(chained({ previous_response_id: 'resp_1', input: 'next' }))).rejects.toThrow(
      /Previous response with id 'resp_1' not found/,
    );
  });
});
