import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { z, type ZodType } from 'zod';
import { errorBody } from './schemas.js';

type Operation = {
  requestBody?: { required?: boolean };
  responses?: Record<string, { description?: string }>;
  security?: unknown;
};
type Paths = Record<string, Record<string, Operation>>;

/** The error answer every route may give instead of its own. */
const ERROR_RESPONSE = {
  description: 'An error: 400 invalid request, 401/403 key, 404 unknown run or schedule, 409 conflict',
  content: { 'application/json': { schema: jsonSchemaOf(errorBody) } },
};

/**
 * How @fastify/swagger builds `GET /openapi.json`: OpenAPI 3.1 from the `/api/` routes' zod
 * schemas (fastify-type-provider-zod turns them into JSON Schema), so the document is what the
 * handlers are typed and validated by. The console's files, /healthz and the document itself are
 * left out. Registered on the root instance, where its hook sees every route.
 */
export function openApiOptions(): FastifyDynamicSwaggerOptions {
  // @fastify/swagger marks every request body required; the API's optional ones (a note, a reason) are not.
  const optionalBodies = new Set<string>();
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Rein API',
        version: '1',
        description: 'Training runs, schedules and policies of a Rein installation.',
      },
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: "The gateway's admin key" } },
      },
    },
    transform: (input) => {
      if (!input.url.startsWith('/api/')) return { schema: { hide: true } as typeof input.schema, url: input.url };
      const body = input.schema.body as ZodType | undefined;
      if (body?.safeParse(undefined).success) optionalBodies.add(operationKey(String(input.route.method), input.url));
      return jsonSchemaTransform(input);
    },
    transformObject: (document) => {
      if (!('openapiObject' in document)) throw new Error('the API builds an OpenAPI 3.1 document, not Swagger 2');
      const { openapiObject } = document;
      for (const [path, operations] of Object.entries((openapiObject.paths ?? {}) as Paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          if (operation.requestBody && optionalBodies.has(operationKey(method, path)))
            operation.requestBody.required = false;
          for (const answer of Object.values(operation.responses ?? {}))
            if (answer.description === 'Default Response') answer.description = 'OK';
          operation.responses = { ...operation.responses, default: ERROR_RESPONSE };
          operation.security = [{ bearer: [] }];
        }
      }
      return openapiObject;
    },
  };
}

/** One operation, whether its path is written the Fastify way (`:runId`) or the OpenAPI way (`{runId}`). */
function operationKey(method: string, path: string): string {
  return `${method.toUpperCase()} ${path.replace(/:(\w+)/g, '{$1}')}`;
}

function jsonSchemaOf(schema: ZodType): unknown {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'output', target: 'draft-2020-12' });
  return rest;
}
