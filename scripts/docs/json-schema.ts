/**
 * Flattening a JSON Schema (what zod's z.toJSONSchema writes) into one row per key path, for the
 * generated references: `gateway.backends.<name>.endpoints`, `gateway.redact.rules[].regex`.
 */

export interface JsonSchema {
  type?: string | string[];
  description?: string;
  default?: unknown;
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  propertyNames?: JsonSchema;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  format?: string;
  pattern?: string;
}

export interface SchemaRow {
  /** Dotted path; `<name>` for a key of a map, `[]` for an array's items. */
  path: string;
  schema: JsonSchema;
  required: boolean;
}

/** Every key path under a schema, parents before their children, in declaration order. */
export function schemaRows(root: JsonSchema, prefix = '', maxDepth = Infinity): SchemaRow[] {
  const rows: SchemaRow[] = [];
  const visit = (schema: JsonSchema, path: string, required: boolean, depth: number) => {
    if (path) rows.push({ path, schema, required });
    if (depth >= maxDepth) return;
    for (const [childPath, child, childRequired] of children(schema, path))
      visit(child, childPath, childRequired, depth + 1);
  };
  visit(root, prefix, true, 0);
  return rows;
}

function children(schema: JsonSchema, path: string): Array<[string, JsonSchema, boolean]> {
  const join = (key: string) => (path ? `${path}.${key}` : key);
  const out: Array<[string, JsonSchema, boolean]> = [];
  for (const [key, child] of Object.entries(schema.properties ?? {}))
    out.push([join(key), child, (schema.required ?? []).includes(key)]);
  if (typeof schema.additionalProperties === 'object' && hasChildren(schema.additionalProperties)) {
    out.push(...children(schema.additionalProperties, join('<name>')));
  }
  if (schema.items && hasChildren(schema.items)) out.push(...children(schema.items, `${path}[]`));
  // A union of a scalar and an object (`tls: true` or certificate files): the object's keys.
  for (const option of schema.anyOf ?? schema.oneOf ?? []) {
    if (option.properties) out.push(...children(option, path));
  }
  return out;
}

function hasChildren(schema: JsonSchema): boolean {
  return (
    schema.properties !== undefined ||
    typeof schema.additionalProperties === 'object' ||
    (schema.anyOf ?? []).some((o) => o.properties)
  );
}

/** A short type: `integer (≥ 1, ≤ 65535)`, `"a" | "b"`, `string[]`, `map of string`, `integer or null`. */
export function typeOf(schema: JsonSchema): string {
  const union = schema.anyOf ?? schema.oneOf;
  if (union) return union.map(typeOf).join(' or ');
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  const type = Array.isArray(schema.type) ? schema.type.join(' or ') : schema.type;
  if (type === 'array') return schema.items ? arrayOf(schema.items) : 'any[]';
  if (type === 'object') {
    // Named fields with others passing through (a zod loose object) is an object, not a map.
    if (typeof schema.additionalProperties === 'object' && !schema.properties)
      return `map of ${typeOf(schema.additionalProperties)}`;
    return 'object';
  }
  if (type === 'integer' || type === 'number') return `${type}${range(schema)}`;
  if (type === 'string' && schema.format) return `string (${schema.format})`;
  return type ?? 'any';
}

function arrayOf(items: JsonSchema): string {
  const inner = typeOf(items);
  return /[ |]/.test(inner) ? `list of ${inner}` : `${inner}[]`;
}

function range(schema: JsonSchema): string {
  const safe = (n: number | undefined) => (n !== undefined && Math.abs(n) < Number.MAX_SAFE_INTEGER ? n : undefined);
  const low = safe(schema.minimum) ?? safe(schema.exclusiveMinimum);
  const high = safe(schema.maximum) ?? safe(schema.exclusiveMaximum);
  const lowSign = schema.exclusiveMinimum !== undefined && schema.minimum === undefined ? '>' : '≥';
  const highSign = schema.exclusiveMaximum !== undefined && schema.maximum === undefined ? '<' : '≤';
  if (low !== undefined && high !== undefined) return ` (${lowSign} ${low}, ${highSign} ${high})`;
  if (low !== undefined) return ` (${lowSign} ${low})`;
  if (high !== undefined) return ` (${highSign} ${high})`;
  return '';
}

/** Text for a Markdown table cell: one line, pipes escaped. */
export function cell(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');
}

/** A default as a code span, or empty when there is none worth showing (an object filled in by its keys). */
export function defaultOf(schema: JsonSchema): string {
  if (schema.default === undefined) return '';
  const value = schema.default;
  if (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.keys(value).length === 0 &&
    schema.properties
  )
    return '';
  return `\`${cell(JSON.stringify(value))}\``;
}
