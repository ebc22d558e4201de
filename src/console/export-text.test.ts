import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { csvText, jsonText, type ExportValue } from './web/export-text.js';

/** RFC 4180 read back: quoted fields may hold commas, quotes (doubled) and line breaks. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') ((field += '"'), i++);
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') (row.push(field), (field = ''));
    else if (c === '\r' && text[i + 1] === '\n') {
      (row.push(field), rows.push(row), (row = []), (field = ''), i++);
    } else field += c;
  }
  return rows;
}

const cell: fc.Arbitrary<ExportValue> = fc.oneof(
  fc.string({ unit: 'grapheme' }),
  fc.constantFrom('a,b', 'say "hi"', 'two\r\nlines', '\n', ''),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
);

describe('exported tables', () => {
  it('CSV reads back to the same texts, whatever the cells hold', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.array(cell, { minLength: 5, maxLength: 5 })),
        (n, rows) => {
          const headings = ['a', 'b,c', 'd"e', 'f', 'g'].slice(0, n);
          const cut = rows.map((r) => r.slice(0, n));
          const text = (v: ExportValue) => (v === null ? '' : String(v));
          expect(parseCsv(csvText(headings, cut))).toEqual([headings, ...cut.map((r) => r.map(text))]);
        },
      ),
    );
  });

  it('JSON keeps values typed, keyed by heading', () => {
    expect(
      JSON.parse(
        jsonText(
          ['id', 'reward', 'ok'],
          [
            ['r1', 0.5, true],
            ['r2', null, false],
          ],
        ),
      ),
    ).toEqual([
      { id: 'r1', reward: 0.5, ok: true },
      { id: 'r2', reward: null, ok: false },
    ]);
  });
});
