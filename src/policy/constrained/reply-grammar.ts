import { z } from 'zod';
import { HttpError } from '../policy-http.js';
import { ANY, ANY_OBJECT, compileSchema, type ObjectShape } from './schema-shape.js';
import type { ReplyGrammar } from './token-constraint.js';

/** `response_format` as the embedded server takes it: text, or JSON enforced by constrained decoding. */
export const responseFormatField = z
  .discriminatedUnion(
    'type',
    [
      z.object({ type: z.literal('text') }),
      z.object({ type: z.literal('json_object') }),
      z.object({
        type: z.literal('json_schema'),
        json_schema: z.object({
          name: z.string().min(1),
          description: z.string().nullish(),
          schema: z.record(z.string(), z.unknown()).nullish(),
          strict: z.boolean().nullish(),
        }),
      }),
    ],
    {
      error: (issue) =>
        issue.code === 'invalid_union'
          ? `${JSON.stringify((issue.input as { type?: unknown } | undefined)?.type)} is not supported by the ` +
            'embedded policy server (it takes "text", "json_object" and "json_schema"); serve the policy with ' +
            'vLLM or SGLang for other guided-decoding formats'
          : undefined,
    },
  )
  .nullish();

/** The fields of a chat request that constrain its reply. */
export interface ConstrainedRequest {
  tools?: unknown[] | null | undefined;
  tool_choice?: 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } } | null | undefined;
  parallel_tool_calls?: boolean | null | undefined;
  response_format?: z.infer<typeof responseFormatField>;
}

const badRequest = (message: string) => new HttpError(400, 'BadRequestError', message);

/** The names parseToolCalls (chat-format.ts) reads back after `<tool_call>`. */
const CALLABLE_NAME = /^[A-Za-z_][\w.-]*$/;
const functionTool = z.object({
  type: z.literal('function'),
  function: z.object({ name: z.string(), parameters: z.unknown().optional(), strict: z.boolean().nullish() }),
});

/** Each offered function's name and the shape its arguments must take. */
function toolShapes(tools: unknown[], only?: string): Map<string, ObjectShape> {
  const shapes = new Map<string, ObjectShape>();
  tools.forEach((tool, i) => {
    const parsed = functionTool.safeParse(tool);
    if (!parsed.success)
      throw badRequest(
        `tools[${i}]: a forced tool call needs {"type": "function", "function": {"name", "parameters"}}`,
      );
    const { name, parameters, strict } = parsed.data.function;
    if (only !== undefined && name !== only) return;
    if (!CALLABLE_NAME.test(name))
      throw badRequest(
        `tools[${i}].function.name: "${name}" cannot be written in the embedded model's tool-call syntax ` +
          '(letters, digits, _ . -, not starting with a digit); rename the tool',
      );
    const field = `tools[${i}].function.parameters`;
    const shape = compileSchema(parameters ?? {}, { field, strict: strict ?? false });
    if (shape.kind !== 'object' && shape.kind !== 'any')
      throw badRequest(`${field}: tool arguments are a JSON object; give an object schema ({"type": "object", …})`);
    shapes.set(name, shape.kind === 'object' ? shape : ANY_OBJECT);
  });
  return shapes;
}

/**
 * The grammar a request's reply is generated under, or none. `tool_choice: "required"`: one or
 * more calls (one where `parallel_tool_calls` is false) of the offered functions and nothing else;
 * a named function: exactly one call of it. `response_format` `json_object`: the reply is one JSON
 * object; `json_schema`: one JSON value matching the schema's enforced subset (schema-shape.ts).
 */
export function replyGrammar(body: ConstrainedRequest): ReplyGrammar | undefined {
  const choice = body.tool_choice ?? 'auto';
  const forced = choice === 'required' || typeof choice === 'object';
  const format = body.response_format;
  const json = format?.type === 'json_object' || format?.type === 'json_schema';
  if (forced && json)
    throw badRequest(
      `tool_choice: ${JSON.stringify(choice)} and response_format: "${format.type}" each constrain the whole reply; ` +
        'ask for one of them',
    );
  if (format?.type === 'json_object') return { kind: 'json', shape: ANY_OBJECT };
  if (format?.type === 'json_schema') {
    const { schema, strict } = format.json_schema;
    const context = { field: 'response_format.json_schema.schema', strict: strict ?? false };
    return { kind: 'json', shape: schema ? compileSchema(schema, context) : ANY };
  }
  if (!forced) return undefined;
  const tools = body.tools ?? [];
  if (tools.length === 0) throw badRequest(`tool_choice: ${JSON.stringify(choice)} needs tools to call; offer some`);
  if (choice === 'required')
    return { kind: 'tool_calls', tools: toolShapes(tools), parallel: body.parallel_tool_calls !== false };
  const named = toolShapes(tools, choice.function.name);
  if (named.size === 0)
    throw badRequest(`tool_choice names the function "${choice.function.name}", which is not among the tools`);
  return { kind: 'tool_calls', tools: named, parallel: false };
}
