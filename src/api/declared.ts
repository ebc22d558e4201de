import type { z, ZodType } from 'zod';

type Leaf = string | number | boolean | bigint | symbol | null | undefined | Date;

/**
 * The fields of `Returned`, at any depth (as dotted paths), that `Declared` does not have: never
 * when a response schema declares everything its source returns. A field left out would not only
 * go undocumented: the response serializer drops what the schema does not declare.
 */
export type Undeclared<Returned, Declared, Path extends string = ''> = unknown extends Declared
  ? never
  : Returned extends Leaf
    ? never
    : Returned extends readonly (infer Item)[]
      ? Undeclared<Item, Declared extends readonly (infer DeclaredItem)[] ? DeclaredItem : never, `${Path}[]`>
      : {
          [K in keyof Returned & string]: K extends keyof NonNullable<Declared>
            ? Undeclared<Returned[K], NonNullable<Declared>[K], `${Path}${Path extends '' ? '' : '.'}${K}`>
            : `${Path}${Path extends '' ? '' : '.'}${K}`;
        }[keyof Returned & string];

/**
 * The response schema, accepted by the type checker only when it declares every field of
 * `Returned` (what the route's source gives back): `declaring<RunReport>()(runReport)`.
 */
export function declaring<Returned>() {
  return <Schema extends ZodType>(
    schema: Schema &
      ([Undeclared<Returned, z.output<Schema>>] extends [never]
        ? unknown
        : { undeclaredFields: Undeclared<Returned, z.output<Schema>> }),
  ): Schema => schema;
}
