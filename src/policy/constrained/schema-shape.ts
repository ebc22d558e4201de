import { HttpError } from '../policy-http.js';

/**
 * The JSON values a constrained reply may take, compiled from the JSON Schema subset the embedded
 * server enforces. `literal` holds the canonical texts (JSON.stringify) of an enum or const: the
 * reply writes one of them exactly. A `union`'s options start with different bytes, so the first
 * byte of the value decides which one it is.
 */
export type Shape =
  | { kind: 'any' | 'string' | 'number' | 'integer' | 'boolean' | 'null' }
  | ObjectShape
  | { kind: 'array'; items: Shape }
  | { kind: 'literal'; texts: readonly string[] }
  | { kind: 'union'; options: readonly Shape[] };

export interface ObjectShape {
  kind: 'object';
  properties: ReadonlyMap<string, Shape>;
  required: readonly string[];
  /** The shape of a member not among `properties`; false: none may appear. */
  additional: Shape | false;
}

export const ANY: Shape = { kind: 'any' };
export const ANY_OBJECT: ObjectShape = { kind: 'object', properties: new Map(), required: [], additional: ANY };

/** Keywords that describe without constraining: never refused. */
const ANNOTATIONS = new Set([
  'title',
  'description',
  '$schema',
  '$id',
  '$comment',
  'default',
  'examples',
  'deprecated',
  'readOnly',
  'writeOnly',
  'strict',
]);
/** Keywords this compiler enforces (each where its value is of the supported form). */
const ENFORCED = new Set(['type', 'properties', 'required', 'additionalProperties', 'enum', 'const', 'items', 'anyOf']);
const TYPES = ['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'] as const;

/** Where a schema sits in the request (for messages) and whether an unenforced keyword is refused. */
export interface SchemaContext {
  field: string;
  strict: boolean;
}

function refuse(context: SchemaContext, at: string, what: string): never {
  throw new HttpError(
    400,
    'BadRequestError',
    `${context.field}${at}: ${what}; the embedded policy server enforces type, properties, required, ` +
      'additionalProperties, enum, const, items and anyOf of types that start differently. Drop it, set ' +
      'strict to false (it is then left unenforced), or serve the policy with vLLM or SGLang',
  );
}

/**
 * Compiles a JSON Schema into the shape the grammar enforces. A keyword outside the subset is
 * refused (400 naming it) where `strict` is set, and left unenforced otherwise; a schema no value
 * can satisfy (an empty enum, a required property that may not appear) is refused either way.
 */
export function compileSchema(schema: unknown, context: SchemaContext, at = ''): Shape {
  if (schema === true || (typeof schema === 'object' && schema !== null && Object.keys(schema).length === 0))
    return ANY;
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema))
    refuse(context, at, `a schema must be an object, not ${JSON.stringify(schema)}`);
  const node = schema as Record<string, unknown>;
  for (const key of Object.keys(node))
    if (!ENFORCED.has(key) && !ANNOTATIONS.has(key) && context.strict)
      refuse(context, at, `the keyword "${key}" is not enforced`);
  if ('enum' in node || 'const' in node) return literalShape(node, context, at);
  if (Array.isArray(node.anyOf)) return unionShape(node.anyOf, context, `${at}.anyOf`);
  if (node.anyOf !== undefined) refuse(context, at, 'anyOf must be an array of schemas');
  const type = node.type;
  if (type === undefined) return ANY;
  if (Array.isArray(type))
    return unionShape(
      type.map((t: unknown) => ({ ...node, type: t })),
      context,
      `${at}.type`,
    );
  if (!TYPES.includes(type as (typeof TYPES)[number])) refuse(context, at, `unknown type ${JSON.stringify(type)}`);
  if (type === 'object') return objectShape(node, context, at);
  if (type === 'array')
    return { kind: 'array', items: node.items === undefined ? ANY : compileSchema(node.items, context, `${at}.items`) };
  return { kind: type as 'string' | 'number' | 'integer' | 'boolean' | 'null' };
}

function objectShape(node: Record<string, unknown>, context: SchemaContext, at: string): ObjectShape {
  const raw = node.properties ?? {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    refuse(context, at, 'properties must be an object of schemas');
  const properties = new Map(
    Object.entries(raw).map(([name, sub]) => [name, compileSchema(sub, context, `${at}.properties.${name}`)]),
  );
  const required = node.required ?? [];
  if (!Array.isArray(required) || required.some((r) => typeof r !== 'string'))
    refuse(context, at, 'required must be an array of property names');
  const extra = node.additionalProperties;
  const additional =
    extra === false ? false : extra === undefined ? ANY : compileSchema(extra, context, `${at}.additionalProperties`);
  const missing = (required as string[]).find((name) => additional === false && !properties.has(name));
  if (missing !== undefined)
    refuse(context, at, `"${missing}" is required but not among the properties, and additionalProperties is false`);
  return { kind: 'object', properties, required: [...new Set(required as string[])], additional };
}

/** The value kinds a JSON text's first byte tells apart. */
function startsOf(shape: Shape): string[] {
  switch (shape.kind) {
    case 'any':
      return ['object', 'array', 'string', 'number', 'boolean', 'null'];
    case 'integer':
      return ['number'];
    case 'literal':
      return [...new Set(shape.texts.map((t) => startsOf(kindOfText(t))[0] as string))];
    case 'union':
      return shape.options.flatMap(startsOf);
    default:
      return [shape.kind];
  }
}

function kindOfText(text: string): Shape {
  const value: unknown = JSON.parse(text);
  if (value === null) return { kind: 'null' };
  if (Array.isArray(value)) return { kind: 'array', items: ANY };
  return typeof value === 'object' ? ANY_OBJECT : { kind: typeof value as 'string' | 'number' | 'boolean' };
}

function unionShape(options: unknown[], context: SchemaContext, at: string): Shape {
  if (options.length === 0) refuse(context, at, 'no value satisfies an empty anyOf');
  const shapes = options.map((option, i) => compileSchema(option, context, `${at}[${i}]`));
  // number and integer overlap: their union is a number.
  const merged = shapes.some((s) => s.kind === 'number') ? shapes.filter((s) => s.kind !== 'integer') : shapes;
  const starts = merged.flatMap(startsOf);
  if (new Set(starts).size === starts.length)
    return merged.length === 1 ? (merged[0] as Shape) : { kind: 'union', options: merged };
  if (context.strict)
    refuse(context, at, 'anyOf alternatives that can start alike (two objects, an enum and a type) are not enforced');
  return ANY;
}

function literalShape(node: Record<string, unknown>, context: SchemaContext, at: string): Shape {
  const values = 'const' in node ? [node.const] : node.enum;
  if (!Array.isArray(values)) refuse(context, at, 'enum must be an array of values');
  const type = node.type;
  const typed = values.filter(
    (v) =>
      type === undefined ||
      ([] as unknown[])
        .concat(type)
        .some((t) => t === typeOfValue(v) || (t === 'number' && typeOfValue(v) === 'integer')),
  );
  const texts = [...new Set(typed.map((v) => JSON.stringify(v)))];
  if (texts.length === 0) refuse(context, at, 'no value satisfies this enum or const (with its type)');
  return { kind: 'literal', texts };
}

function typeOfValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}
