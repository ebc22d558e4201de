import { describe, expectTypeOf, it } from 'vitest';
import type { Undeclared } from './declared.js';

// Checked by the type checker (npm run lint): a response schema that drops a field must not compile.
describe('Undeclared', () => {
  it('names the fields a schema leaves out, at any depth, as paths', () => {
    expectTypeOf<
      Undeclared<{ a: string; b?: { c: number; d: string[] } }, { a: string; b?: { c: number } }>
    >().toEqualTypeOf<'b.d'>();
    expectTypeOf<
      Undeclared<{ at: Date; list: Array<{ x: number; y: number }> }, { at: Date; list: Array<{ x: number }> }>
    >().toEqualTypeOf<'list[].y'>();
    expectTypeOf<Undeclared<{ a: { b: 1 } | null }, { a: { c: 1 } | null }>>().toEqualTypeOf<'a.b'>();
  });

  it('is never when everything is declared, or passes through as unknown', () => {
    expectTypeOf<
      Undeclared<{ a: string; b?: number }, { a: string; b?: number; extra?: boolean }>
    >().toEqualTypeOf<never>();
    expectTypeOf<
      Undeclared<{ counts: Record<string, number> }, { counts: Record<string, number> }>
    >().toEqualTypeOf<never>();
    expectTypeOf<
      Undeclared<{ record: { deep: { deeper: 1 } } }, { record: Record<string, unknown> }>
    >().toEqualTypeOf<never>();
    expectTypeOf<Undeclared<{ payload: { any: 1 } }, { payload: unknown }>>().toEqualTypeOf<never>();
  });
});
