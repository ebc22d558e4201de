import { buildApi } from '../../src/api/server.js';
import { validateConfig } from '../../src/config/load.js';
import { sentence } from './cli-reference.js';
import { GENERATED_NOTE } from './config-reference.js';
import { cell, defaultOf, schemaRows, typeOf, type JsonSchema } from './json-schema.js';
import { slug } from './markdown.js';

interface Operation {
  summary: string;
  /** Absent when the route takes none. */
  parameters?: Array<{ name: string; in: string; required: boolean; description?: string; schema: JsonSchema }>;
  requestBody?: { required: boolean; content: { 'application/json': { schema: JsonSchema } } };
  responses: Record<string, { description: string; content?: { 'application/json': { schema: JsonSchema } } }>;
}

interface OpenApiDocument {
  info: { title: string; description: string };
  paths: Record<string, Record<string, Operation>>;
}

/** The document `GET /openapi.json` answers, from the API's route table; no server listens and nothing is connected. */
export async function openApiDocument(): Promise<OpenApiDocument> {
  // The routes' handlers use the Temporal client and the stores; building the document touches neither.
  const app = buildApi({ config: validateConfig({}, 'docs'), client: {} as never, keyHash: '0'.repeat(64) });
  try {
    const answer = await app.inject({ method: 'GET', url: '/openapi.json' });
    if (answer.statusCode !== 200) throw new Error(`GET /openapi.json answered ${answer.statusCode}: ${answer.body}`);
    return JSON.parse(answer.body) as OpenApiDocument;
  } finally {
    await app.close();
  }
}

/**
 * docs/reference/http-api.md: every route of Rein's HTTP API with its parameters, body and answer, from the OpenAPI
 * document.
 */
export async function httpReference(): Promise<string> {
  const doc = await openApiDocument();
  const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  );
  const lines = [
    '# HTTP API reference',
    '',
    GENERATED_NOTE(
      "the OpenAPI document Rein's API builds (`src/api/routes/`, `src/api/schemas.ts`, `src/api/console-schemas.ts`)",
    ),
    '',
    `${doc.info.description} Served by \`rein api\` and \`rein dev\` on \`api.port\` (8402); \`GET /openapi.json\` answers this`,
    "document as OpenAPI 3.1. Every route takes the gateway's admin key as `Authorization: Bearer <key>`. What the",
    "API is for, its errors and limits: [The training loop](../training-loop.md#the-http-api). The gateway's own",
    'rollout API (on `gateway.port`) is described in [The gateway](../gateway.md#rollout-api).',
    '',
    'Errors are `{"error": {"code", "message"}}`.',
    '',
    '## Routes',
    '',
    '| method | path | what |',
    '|---|---|---|',
    ...operations.map(
      ({ method, path, op }) => `| ${method} | [\`${path}\`](#${anchorOf(method, path)}) | ${cell(op.summary)} |`,
    ),
  ];
  for (const { method, path, op } of operations) lines.push('', ...operationSection(method, path, op));
  return `${lines.join('\n')}\n`;
}

function anchorOf(method: string, path: string): string {
  return slug(`${method} ${path}`);
}

function operationSection(method: string, path: string, op: Operation): string[] {
  const lines = [`### ${method} ${path}`, '', sentence(op.summary)];
  const parameters = op.parameters ?? [];
  if (parameters.length > 0) {
    lines.push('', '| parameter | in | type | required | default | description |', '|---|---|---|---|---|---|');
    for (const p of parameters)
      lines.push(
        `| \`${p.name}\` | ${p.in} | ${cell(typeOf(p.schema))} | ${p.required ? 'yes' : 'no'} | ${defaultOf(p.schema)} | ${cell(p.description ?? p.schema.description ?? '')} |`,
      );
  }
  const body = op.requestBody?.content['application/json'].schema;
  if (body) {
    lines.push('', `Request body (JSON${op.requestBody?.required ? '' : ', optional'}):`, '', ...fieldTable(body));
  }
  for (const [status, answer] of Object.entries(op.responses)) {
    if (status === 'default') continue;
    const schema = answer.content?.['application/json'].schema;
    lines.push('', `Answer ${status}${schema ? ':' : '.'}`);
    if (schema) lines.push('', ...fieldTable(schema));
  }
  return lines;
}

function fieldTable(schema: JsonSchema): string[] {
  const rows = schemaRows(schema);
  if (rows.length === 0) return [`A JSON ${cell(typeOf(schema))}.`];
  return [
    '| field | type | required | description |',
    '|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| \`${r.path}\` | ${cell(typeOf(r.schema))} | ${r.required ? 'yes' : 'no'} | ${cell([r.schema.description, defaultText(r.schema)].filter(Boolean).join('; '))} |`,
    ),
  ];
}

function defaultText(schema: JsonSchema): string {
  const value = defaultOf(schema);
  return value ? `default ${value}` : '';
}
