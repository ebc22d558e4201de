import type { FastifySchemaCompiler } from 'fastify';
import type { ZodType } from 'zod';
import { ApiError } from './errors.js';

/** Where the caller sent the part, as the API's messages name it. */
const PART_NAMES: Record<string, string> = { params: 'path', querystring: 'query', body: 'body' };

/**
 * Fastify's validator for the routes' zod schemas (their types come from fastify-type-provider-zod).
 * Unlike that library's, a missing body reaches the schema as undefined (Fastify hands over null),
 * so that an optional body may be left out, and a refusal is Rein's 400 naming each problem's place.
 */
export const zodValidatorCompiler: FastifySchemaCompiler<ZodType> =
  ({ schema, httpPart }) =>
  (data) => {
    const part = PART_NAMES[httpPart ?? ''] ?? httpPart ?? 'request';
    const result = schema.safeParse(part === 'body' && data === null ? undefined : data);
    if (result.success) return { value: result.data };
    const problems = result.error.issues.map(
      (i) => `${part}${i.path.length ? `.${i.path.join('.')}` : ''}: ${i.message}`,
    );
    return { error: new ApiError(400, 'invalid_request', problems.join('; ')) };
  };
