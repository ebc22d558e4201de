import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../rollouts/harness-spec.js';
import { seededRandom } from '../../random.js';
import { type ObservationsSpec, observationsSchema } from '../variant-spec.js';
import { reshapeObservation } from './observations.js';

const reshape = (spec: ObservationsSpec | undefined, text: string, seed = 1) =>
  reshapeObservation(spec === undefined ? undefined : observationsSchema.parse(spec), text, seededRandom(seed));

/** A JSON value with arrays in a fixed order, so two values with the same content compare equal. */
function content(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(content).sort((a, b) => (canonicalJson(a) < canonicalJson(b) ? -1 : 1));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, content(v)]));
}

describe('reshapeObservation', () => {
  it('returns the observation as it is with no spec or an empty one', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        expect(reshape(undefined, text)).toBe(text);
        expect(reshape({}, text)).toBe(text);
      }),
    );
  });

  it('format json: wraps plain output as {"result": …} and leaves JSON objects and arrays alone', () => {
    expect(reshape({ format: 'json' }, 'the answer is 42')).toBe('{"result":"the answer is 42"}');
    expect(reshape({ format: 'json' }, '42')).toBe('{"result":"42"}');
    expect(reshape({ format: 'json' }, '{ "a": 1 }')).toBe('{ "a": 1 }');
    expect(reshape({ format: 'json' }, '[1, 2]')).toBe('[1, 2]');
  });

  it('format lines: a JSON object as key: value lines, strings bare and other values as JSON', () => {
    expect(reshape({ format: 'lines' }, '{"name":"Ada","age":36,"tags":["x"],"boss":null}')).toBe(
      'name: Ada\nage: 36\ntags: ["x"]\nboss: null',
    );
    for (const other of ['[1,2]', 'plain text', '7', '{}']) expect(reshape({ format: 'lines' }, other)).toBe(other);
  });

  it('reorder keeps the same JSON content: the same keys and values, the same items in each array', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer(), fc.boolean(), (value, seed, indented) => {
        const text = JSON.stringify(value, null, indented ? 2 : undefined);
        const out = reshape({ reorder: true }, text, seed);
        expect(content(JSON.parse(out))).toEqual(content(JSON.parse(text)));
      }),
    );
  });

  it('reorder shuffles keys and items by the seed, and keeps indentation', () => {
    const text = JSON.stringify({ a: 1, b: 2, c: 3, d: 4, e: [1, 2, 3, 4, 5, 6] });
    const orders = new Set([1, 2, 3, 4, 5].map((seed) => reshape({ reorder: true }, text, seed)));
    expect(orders.size).toBeGreaterThan(1);
    expect(reshape({ reorder: true }, JSON.stringify({ a: 1, b: [2] }, null, 2), 3)).toMatch(/^\{\n {2}"/);
  });

  it('reorder leaves alone what is not JSON, scalars, and numbers a re-serialisation would change', () => {
    for (const text of ['not json {"a":1}', '42', '"a string"', '{"id": 12345678901234567890, "b": 1}', '[1e400, 2]'])
      expect(reshape({ reorder: true }, text)).toBe(text);
    const proto = reshape({ reorder: true }, '{"__proto__": {"x": 1}, "y": 2}');
    expect(JSON.parse(proto)).toEqual(JSON.parse('{"__proto__": {"x": 1}, "y": 2}'));
  });

  it('noise puts n distractor lines before the output', () => {
    const out = reshape({ noise: { lines: 4 } }, 'result: 7').split('\n');
    expect(out).toHaveLength(5);
    expect(out[4]).toBe('result: 7');
    for (const line of out.slice(0, 4)) expect(line).toMatch(/^(note|info|debug|trace): /);
  });

  it('template rewords the output, keeping `$` patterns in it as they are', () => {
    expect(reshape({ template: 'Tool says: {observation} (end {observation})' }, 'cost $& $1')).toBe(
      'Tool says: cost $& $1 (end cost $& $1)',
    );
  });

  it('applies format, reorder, noise, template in that order', () => {
    const out = reshape(
      { format: 'json', reorder: true, noise: { lines: 1 }, template: '<<{observation}>>' },
      'plain answer',
    );
    expect(out).toMatch(/^<<(note|info|debug|trace): [^\n]+\n\{"result":"plain answer"\}>>$/);
  });

  it('gives the same text for the same seed', () => {
    const spec: ObservationsSpec = { reorder: true, noise: { lines: 3 }, template: '> {observation}' };
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer(), (value, seed) => {
        const text = JSON.stringify(value);
        expect(reshape(spec, text, seed)).toBe(reshape(spec, text, seed));
      }),
    );
    const noisy = new Set([1, 2, 3, 4].map((seed) => reshape({ noise: { lines: 2 } }, 'x', seed)));
    expect(noisy.size).toBeGreaterThan(1);
  });
});
