import type { MessageCreateParamsBase } from '@anthropic-ai/sdk/resources/messages/messages';
import { z } from 'zod';
import { invalidRequest } from './errors.js';

/**
 * A Messages request as the translation takes it: the SDK's parameters, plus the sampling fields
 * the API takes (temperature, top_p, top_k) that this SDK version's types no longer list.
 */
export type MessagesRequest = MessageCreateParamsBase & {
  temperature?: number;
  top_p?: number;
  top_k?: number;
};

/** The fields toChat translates; each other field is refused, or accepted only if listed as neutral. */
const requestFields = z.object({
  model: z.string({ error: 'model: Field required' }).min(1),
  max_tokens: z
    .number({
      error: (issue) => (issue.input === undefined ? 'max_tokens: Field required' : 'max_tokens: must be a number'),
    })
    .int()
    .min(1),
  messages: z.array(z.object({ role: z.string(), content: z.unknown() }).passthrough(), {
    error: 'messages: Field required',
  }),
  system: z.union([z.string(), z.array(z.unknown())]).optional(),
  stop_sequences: z.array(z.string()).optional(),
  stream: z.boolean().optional(),
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  top_k: z.number().int().min(1).optional(),
  tools: z.array(z.object({ name: z.string().optional(), type: z.string().nullish() }).passthrough()).optional(),
  tool_choice: z.object({ type: z.string() }).passthrough().optional(),
  thinking: z.object({ type: z.string() }).passthrough().optional(),
  metadata: z.object({ user_id: z.string().nullish() }).passthrough().optional(),
});

/**
 * Fields with no effect on what the model writes (prompt caching, which tier or region answers):
 * taken and left out of the chat request.
 */
const NEUTRAL_FIELDS = new Set(['cache_control', 'service_tier', 'speed', 'inference_geo']);

/** The request checked: its fields well-typed, none unknown (a field this server would ignore is a 400). */
export function checkedRequest(raw: unknown): MessagesRequest {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw invalidRequest('the request body must be a JSON object (a Messages API request)');
  const parsed = requestFields.safeParse(raw);
  if (!parsed.success)
    throw invalidRequest(
      parsed.error.issues
        .map((issue) => (/^\w+: /.test(issue.message) ? issue.message : `${issue.path.join('.')}: ${issue.message}`))
        .join('; '),
    );
  const unknown = Object.keys(raw).filter(
    (key) => !Object.hasOwn(requestFields.shape, key) && !NEUTRAL_FIELDS.has(key),
  );
  if (unknown.length > 0)
    throw invalidRequest(
      `${unknown.join(', ')}: not supported when the Messages API is served from chat completions, which ` +
        `would ignore ${unknown.length > 1 ? 'them' : 'it'} and change what the model writes unseen; leave ` +
        `${unknown.length > 1 ? 'them' : 'it'} out`,
    );
  return raw as MessagesRequest;
}
