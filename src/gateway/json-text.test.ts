import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  addition,
  applyEdits,
  elementsOf,
  membersOf,
  nestedDeeperThan,
  removals,
  StructuralScan,
  type Span,
} from './json-text.js';

/**
 * A JSON object's text as some writer might lay it out (any whitespace, escapes, number spellings),
 * with its keys and each value's text as written. The properties compare with these, not with
 * JSON.parse: V8's JSON.parse (Node.js 24 and 26) can decode an escaped key as another key parsed
 * before it (nodejs/node#63785), which made these properties fail now and then on Node.js 24.
 */
const objectWithParts = fc
  .tuple(
    fc.uniqueArray(fc.string({ unit: fc.constantFrom('a', 'b', '"', '\\', 'é', '🌍', ' ') }), { maxLength: 6 }),
    fc.array(
      fc.oneof(
        fc.jsonValue().map((v) => JSON.stringify(v, null, 1)),
        fc.constantFrom('1.0', '-0.0', '9007199254740993', '1e400', '"a\\"b\\\\"'),
      ),
      { minLength: 6, maxLength: 6 },
    ),
    fc.constantFrom('', ' ', '\n  ', '\t'),
  )
  .map(([keys, values, space]) => ({
    keys,
    values: values.slice(0, keys.length),
    text: `{${space}${keys.map((k, i) => `${JSON.stringify(k)}${space}:${space}${values[i]}`).join(`${space},${space}`)}${space}}`,
  }));
describe('json-text', () => {
  it('finds every member of an object, keys decoded and values exactly as written', () => {
    fc.assert(
      fc.property(objectWithParts, ({ keys, values, text }) => {
        const { members, end } = membersOf(text, 0);
        expect(end).toBe(text.length);
        expect(members.map((m) => m.key)).toEqual(keys);
        expect(members.map((m) => text.slice(m.valueStart, m.valueEnd))).toEqual(values);
      }),
      { numRuns: 300 },
    );
  });

  it('removes any set of members, or adds one, leaving every other byte as it was', () => {
    fc.assert(
      fc.property(objectWithParts, fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }), (object, pick) => {
        const { text } = object;
        const found = membersOf(text, 0);
        const gone = new Set(object.keys.filter((_, i) => pick[i]));
        const out = applyEdits(
          text,
          removals(found.members, (m) => gone.has(m.key)),
        );
        const kept = object.keys.flatMap((key, i) => (gone.has(key) ? [] : [[key, object.values[i]]]));
        // Still JSON (JSON.parse only checks it here: its keys are not to be trusted).
        expect(() => JSON.parse(out)).not.toThrow();
        const left = membersOf(out, 0);
        expect(left.end).toBe(out.length);
        expect(left.members.map((m) => [m.key, out.slice(m.valueStart, m.valueEnd)])).toEqual(kept);
        const added = applyEdits(text, [addition(found, 'added', '1.0')]);
        expect(() => JSON.parse(added)).not.toThrow();
        const grown = membersOf(added, 0);
        expect(grown.members.map((m) => [m.key, added.slice(m.valueStart, m.valueEnd)])).toEqual([
          ...object.keys.map((key, i) => [key, object.values[i]]),
          ['added', '1.0'],
        ]);
        expect(added.startsWith(text.slice(0, found.members.at(-1)?.valueEnd ?? 1))).toBe(true);
        expect(added).toMatch(/"added":1\.0\s*}$/);
      }),
      { numRuns: 300 },
    );
  });

  it('lists array elements and measures nesting without counting brackets inside strings', () => {
    expect(
      elementsOf('[ 1.0 , "]", {"a":[2]} ]', 0).map((s) => '[ 1.0 , "]", {"a":[2]} ]'.slice(s.start, s.end)),
    ).toEqual(['1.0', '"]"', '{"a":[2]}']);
    expect(elementsOf('[]', 0)).toEqual([]);
    expect(nestedDeeperThan('[[["[[[[[["]]]', 3)).toBe(false);
    expect(nestedDeeperThan('[[[{}]]]', 3)).toBe(true);
    expect(nestedDeeperThan('[[[]]]', 3)).toBe(false);
    expect(nestedDeeperThan('[[[[]]]]', 3)).toBe(true);
    // More openers than the limit, but side by side.
    expect(nestedDeeperThan('[{}, {}, {"a": [1]}, {}]', 3)).toBe(false);
  });

  it('measures nesting as deep as the parsed value is, for any JSON', () => {
    const depthOf = (value: unknown): number =>
      value !== null && typeof value === 'object' ? 1 + Math.max(0, ...Object.values(value).map(depthOf)) : 0;
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), fc.integer({ min: 0, max: 6 }), (value, max) => {
        const text = JSON.stringify(value);
        expect(nestedDeeperThan(text, max)).toBe(depthOf(value) > max);
      }),
    );
  });

  it('finds the same values when one scan walks back into values it skipped (as a response is walked, choices then each choice)', () => {
    const spans = (text: string, at: number, scan?: StructuralScan): Span[] =>
      text[at] === '{'
        ? membersOf(text, at, scan).members.map((m) => ({ start: m.valueStart, end: m.valueEnd }))
        : elementsOf(text, at, scan);
    fc.assert(
      fc.property(
        fc.oneof(fc.array(fc.jsonValue()), fc.dictionary(fc.string(), fc.jsonValue())),
        fc.constantFrom(undefined, 1),
        (value, indent) => {
          const text = JSON.stringify(value, null, indent);
          const shared = new StructuralScan(text);
          // Walk the top level first (skipping over every nested value), then go back into each one.
          const top = spans(text, 0, shared);
          expect(top).toEqual(spans(text, 0));
          for (const { start } of top) {
            if (text[start] === '{' || text[start] === '[')
              expect(spans(text, start, shared)).toEqual(spans(text, start));
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
