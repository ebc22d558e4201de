import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { configDiff, leaves } from './web/config-diff.js';

// fast-check's JSON values survive a JSON round trip (no -0, no undefined), as the API's configs do.
const json = fc.jsonValue();

describe('configs compared', () => {
  it('lists the settings that differ, each with every config’s value', () => {
    const a = { samples: { estimator: 'grpo', epsilon: 0.2 }, harness: { command: ['node', 'a.js'] }, base: 'v0' };
    const b = { samples: { estimator: 'rloo', epsilon: 0.2 }, harness: { command: ['node', 'b.js'] }, base: 'v0' };
    const c = { samples: { estimator: 'grpo', epsilon: 0.2 }, harness: { command: ['node', 'a.js'] } };
    expect(configDiff([a, b, c])).toEqual({
      differences: [
        { path: '.base', values: ['"v0"', '"v0"', null] },
        { path: '.harness.command[1]', values: ['"a.js"', '"b.js"', '"a.js"'] },
        { path: '.samples.estimator', values: ['"grpo"', '"rloo"', '"grpo"'] },
      ],
      same: 2,
    });
  });

  it('tells apart keys that would read alike as dotted paths', () => {
    expect([...leaves({ 'a.b': 1, a: { b: 2 }, '': {}, list: [] }).entries()]).toEqual([
      ['["a.b"]', '1'],
      ['.a.b', '2'],
      ['[""]', '{}'],
      ['.list', '[]'],
    ]);
  });

  it('finds no difference exactly when the configs are equal', () => {
    fc.assert(
      fc.property(json, json, (a, b) => {
        expect(configDiff([a, a]).differences).toEqual([]);
        expect(configDiff([a, b]).differences.length === 0).toBe(isDeepStrictEqual(a, b));
      }),
    );
  });
});
