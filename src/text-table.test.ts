import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatTable } from './text-table.js';

const cell = fc.string({ unit: fc.constantFrom('a', 'b', 'x', '1', '-', '.'), maxLength: 30 });
const table = fc.integer({ min: 1, max: 6 }).chain((columns) =>
  fc.record({
    header: fc.array(fc.string({ unit: fc.constantFrom('h', 'k'), minLength: 1, maxLength: 8 }), {
      minLength: columns,
      maxLength: columns,
    }),
    rows: fc.array(fc.array(cell, { minLength: columns, maxLength: columns }), { maxLength: 5 }),
  }),
);

describe('a table fit to a terminal', () => {
  it('leaves out columns in the order given until its lines fit, keeps the rest in order, and says so', () => {
    fc.assert(
      fc.property(table, fc.integer({ min: 20, max: 120 }), ({ header, rows }, width) => {
        const droppable = header.map((_, i) => i).slice(1);
        const out = formatTable(header, rows, { width, dropFirst: droppable, more: 'see --json' }).split('\n');
        const note = out.at(-1)?.startsWith('(') && out.length === rows.length + 2 ? out.pop() : undefined;
        const whole = formatTable(header, rows).split('\n');
        const kept = header.filter((h) => out[0]!.split(/\s{2,}/).includes(h));
        if (!note) {
          // Nothing was left out: the table is as it is without a fit, and it fits.
          expect(out).toEqual(whole);
          expect(Math.max(...whole.map((l) => l.length))).toBeLessThanOrEqual(width);
        } else {
          expect(note).toMatch(/: left out for \d+ columns; see --json\)$/);
          // What was left out was needed: only the first column stands, or the lines fit.
          expect(kept[0]).toBe(header[0]);
          expect(kept.length === 1 || out.every((l) => l.length <= width)).toBe(true);
        }
      }),
    );
  });

  it('prints every column without a width (a pipe, a file)', () => {
    const header = ['run', 'execution', 'policy'];
    const rows = [['run-20261205-0822-74d8', 'COMPLETED', 'run-20261205-0822-74d8.v12']];
    expect(formatTable(header, rows, { width: undefined, dropFirst: [2, 1], more: 'see --json' })).toBe(
      formatTable(header, rows),
    );
    expect(formatTable(header, rows, { width: 40, dropFirst: [2, 1], more: 'see --json' })).toBe(
      'run                     execution\nrun-20261205-0822-74d8  COMPLETED\n(policy: left out for 40 columns; see --json)',
    );
  });
});
