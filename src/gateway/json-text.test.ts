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

/** A JSON object's text as some writer might lay it out (any whitespace, escapes, number spellings). */
const objectText = fc
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
  .map(
    ([keys, values, space]) =>
      `{${space}${keys.map((k, i) => `${JSON.stringify(k)}${space}:${space}${values[i]}`).join(`${space},${space}`)}${space}}`,
  );

describe('json-text', () => {
  it('finds every member of an object, keys decoded and values exactly as written', () => {
    fc.assert(
      fc.property(objectText, (text) => {
        const { members, end } = membersOf(text, 0);
        expect(end).toBe(text.length);
        const parsed = JSON.parse(text) as Record<string, unknown>;
        expect(members.map((m) => m.key)).toEqual(Object.keys(parsed));
        for (const m of members) expect(JSON.parse(text.slice(m.valueStart, m.valueEnd))).toEqual(parsed[m.key]);
      }),
      { numRuns: 300 },
    );
  });

  it('removes any set of members, or adds one, leaving every other byte as it was', () => {
    fc.assert(
      fc.property(objectText, fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }), (text, pick) => {
        const object = membersOf(text, 0);
        const gone = new Set(object.members.filter((_, i) => pick[i]).map((m) => m.key));
        const out = applyEdits(
          text,
          removals(object.members, (m) => gone.has(m.key)),
        );
        const expected = Object.fromEntries(Object.entries(JSON.parse(text) as object).filter(([k]) => !gone.has(k)));
        expect(JSON.parse(out)).toEqual(expected);
        for (const m of object.members.filter((m) => !gone.has(m.key)))
          expect(out).toContain(text.slice(m.valueStart, m.valueEnd));
        const added = applyEdits(text, [addition(object, 'added', '1.0')]);
        expect(JSON.parse(added)).toEqual({ ...(JSON.parse(text) as object), added: 1 });
        expect(added.startsWith(text.slice(0, object.members.at(-1)?.valueEnd ?? 1))).toBe(true);
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
