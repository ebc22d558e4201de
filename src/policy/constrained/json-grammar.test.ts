import { Ajv } from 'ajv';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { feedJson, jsonComplete, jsonStart, stepJson, type JsonState } from './json-grammar.js';
import { ANY, ANY_OBJECT, compileSchema, type Shape } from './schema-shape.js';

const bytesOf = (text: string) => [...Buffer.from(text, 'utf8')];

/** How far the checker takes a text: the index of the first refused byte, or whether it ends whole. */
function check(shape: Shape, text: string): { refusedAt: number } | { complete: boolean } {
  let state: JsonState | null = jsonStart(shape);
  const bytes = bytesOf(text);
  for (const [i, b] of bytes.entries()) {
    state = stepJson(state, b);
    if (state === null) return { refusedAt: i };
  }
  return { complete: jsonComplete(state) };
}

/** The bytes a walk tries: JSON's structure, the schemas' letters, and a two-byte character (é) split in two. */
const WALK_BYTES = bytesOf('{}[],:"\\ \n0123456789.-+eEtrufalsnxkvbcgioyé');

const CLOSERS = bytesOf('"}]0n');

/** Random continuations the checker allows, byte by byte, until the value is whole (or `limit` bytes). */
function walk(shape: Shape, choices: number[], limit = 300): { text: string; complete: boolean } {
  let state = jsonStart(shape);
  const out: number[] = [];
  for (const [step, choice] of choices.slice(0, limit).entries()) {
    if (jsonComplete(state) && (choice % 4 === 0 || step >= limit / 2)) break;
    const allowed = WALK_BYTES.filter((b) => stepJson(state, b) !== null);
    if (allowed.length === 0) break;
    // The second half heads for the end: closing a string or container, else the shortest value.
    const closing = CLOSERS.find((b) => allowed.includes(b));
    const b = step >= limit / 2 && closing !== undefined ? closing : (allowed[choice % allowed.length] as number);
    out.push(b);
    state = stepJson(state, b) as JsonState;
  }
  return { text: Buffer.from(out).toString('utf8'), complete: jsonComplete(state) };
}

const lenient = { field: 'schema', strict: false };
const strict = { field: 'schema', strict: true };

describe('the incremental JSON checker', () => {
  it('takes every prefix of any JSON text as a prefix, and the whole text as complete', () => {
    fc.assert(
      fc.property(fc.json(), (text) => {
        const bytes = bytesOf(text);
        let state: JsonState | null = jsonStart(ANY);
        for (const b of bytes) {
          state = stepJson(state as JsonState, b);
          expect(state).not.toBeNull();
        }
        expect(jsonComplete(state as JsonState)).toBe(true);
      }),
    );
  });

  it('takes pretty-printed objects and unicode, whatever way a character is split', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ unit: 'grapheme' }), fc.jsonValue()), (value) => {
        expect(check(ANY_OBJECT, JSON.stringify(value, null, 2))).toEqual({ complete: true });
      }),
    );
  });

  it('refuses a text at its first bad byte, and bad UTF-8 in a string', () => {
    const cases: Array<[string, number]> = [
      ['{"a":1,}', 7],
      ['[1 2]', 3],
      ['{"a" 1}', 5],
      ['01', 1],
      ['1.e5', 2],
      ['"a\\x"', 3],
      ['tru e', 3],
      [' {}', 0],
      ['{} ', 2],
    ];
    for (const [text, at] of cases) expect(check(ANY, text), text).toEqual({ refusedAt: at });
    expect(feedJson(jsonStart(ANY), [0x22, 0xc0])).toBeNull(); // an overlong lead byte
    expect(feedJson(jsonStart(ANY), [0x22, 0xe2, 0x28])).toBeNull(); // a lead byte without its continuation
    expect(feedJson(jsonStart(ANY), [0x22, 0xed, 0xa0])).toBeNull(); // a UTF-16 surrogate
    expect(feedJson(jsonStart(ANY), [0x22, 0x0a])).toBeNull(); // a raw newline in a string
    expect(check(ANY_OBJECT, '[]')).toEqual({ refusedAt: 0 });
  });

  it('calls a text complete exactly when JSON.parse takes it', () => {
    const alphabet = '{}[],:"\\ 0123456789.e-+tfnrulasx'.split('');
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...alphabet) }), (text) => {
        fc.pre(!/^\s|\s$/.test(text));
        let parses = true;
        try {
          JSON.parse(text);
        } catch {
          parses = false;
        }
        const result = check(ANY, text);
        expect('complete' in result && result.complete).toBe(parses);
      }),
      { numRuns: 2000 },
    );
  });
});

const ajv = new Ajv({ strict: false });
const schemas: object[] = [
  {
    type: 'object',
    properties: {
      ok: { type: 'boolean' },
      n: { enum: [1, 12, 'x', null] },
      tags: { type: 'array', items: { type: 'string', enum: ['a', 'b"c', 'é'] } },
      inner: {
        type: 'object',
        properties: { x: { type: 'integer' }, y: { anyOf: [{ type: 'number' }, { type: 'null' }] } },
        required: ['x'],
        additionalProperties: false,
      },
      any: {},
    },
    required: ['ok', 'inner'],
    additionalProperties: false,
  },
  { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: { type: 'integer' } },
  { type: ['string', 'null'] },
  { type: 'array', items: { type: 'object', properties: { k: { const: 'v' } }, required: ['k'] } },
  { type: 'number' },
];

describe('a JSON Schema subset, enforced byte by byte', () => {
  it('lets every walk through allowed bytes reach a complete text that parses and matches the schema', () => {
    for (const schema of schemas) {
      const shape = compileSchema(schema, strict);
      const validate = ajv.compile(schema);
      let completed = 0;
      fc.assert(
        fc.property(fc.array(fc.nat(), { minLength: 300, maxLength: 300 }), (choices) => {
          const { text, complete } = walk(shape, choices);
          if (!complete) return;
          completed++;
          expect(validate(JSON.parse(text)), text).toBe(true);
        }),
        { numRuns: 60 },
      );
      // Not vacuous: most walks end whole (some wander off in random keys before a required one).
      expect(completed, JSON.stringify(schema)).toBeGreaterThan(15);
    }
  });

  it('takes every prefix of the JSON of values matching the schema', () => {
    const schema = { ...schemas[1], required: ['a'] };
    const shape = compileSchema(schema, strict);
    fc.assert(
      fc.property(fc.string(), fc.dictionary(fc.string(), fc.integer()), (a, rest) => {
        const text = JSON.stringify({ ...rest, a, a2: 3 });
        expect(check(shape, text)).toEqual({ complete: true });
      }),
    );
  });

  it('refuses a missing required property at the closing brace, an unknown one at its key', () => {
    const shape = compileSchema(schemas[0], strict);
    expect(check(shape, '{"ok":true}')).toEqual({ refusedAt: 10 });
    expect(check(shape, '{"ok":true,"zz":1}')).toEqual({ refusedAt: 12 });
    expect(check(shape, '{"ok":true,"ok":false}')).toEqual({ refusedAt: 12 });
    expect(check(shape, '{"ok":1}')).toEqual({ refusedAt: 6 });
    expect(check(shape, '{"inner":{"x":1.5}}')).toEqual({ refusedAt: 15 });
  });

  it('refuses under strict, and leaves unenforced otherwise, a keyword outside the subset', () => {
    const schema = { type: 'object', properties: { s: { type: 'string', pattern: '^a' } } };
    expect(() => compileSchema(schema, strict)).toThrow(/schema\.properties\.s: the keyword "pattern" is not enforced/);
    expect(compileSchema(schema, lenient).kind).toBe('object');
    expect(() => compileSchema({ enum: [] }, lenient)).toThrow(/no value satisfies/);
    expect(() => compileSchema({ type: 'object', required: ['a'], additionalProperties: false }, lenient)).toThrow(
      /"a" is required but not among the properties/,
    );
    expect(() => compileSchema({ anyOf: [{ type: 'object' }, { type: 'object' }] }, strict)).toThrow(/anyOf/);
  });
});
