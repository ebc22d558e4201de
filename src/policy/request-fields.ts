import { z } from 'zod';
import { samplingFields } from './generation.js';
import { HttpError } from './policy-http.js';
import { responseFormatField } from './constrained/reply-grammar.js';
import { toolChoiceField } from './tool-choice.js';

/**
 * Every field a request to the embedded policy server may carry: each one is honored, or taken
 * only at the value that asks for nothing (a penalty of 0). A field not listed
 * here is refused with a 400 naming it — never silently dropped, so a harness never trains on
 * replies generated without what it asked for. vLLM and SGLang backends take many more.
 */
const unsupported = (what: string) =>
  `${what} is not supported by the embedded policy server; serve the policy with vLLM or SGLang for it`;

/** Fields with no effect on the reply at the values allowed. */
const neutralFields = {
  user: z.string().nullish(),
  frequency_penalty: z.literal(0, { error: unsupported('a frequency penalty other than 0') }).nullish(),
  presence_penalty: z.literal(0, { error: unsupported('a presence penalty other than 0') }).nullish(),
};

export const chatRequest = z
  .object({
    ...samplingFields,
    ...neutralFields,
    messages: z.array(z.object({ role: z.string() }).passthrough()).min(1),
    tools: z.array(z.unknown()).nullish(),
    tool_choice: toolChoiceField,
    parallel_tool_calls: z.boolean().nullish(),
    logprobs: z.boolean().nullish(),
    top_logprobs: z.number().int().min(0).max(20).nullish(),
    response_format: responseFormatField,
    chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
    /**
     * Token in (Rein's gateway, `samples.merge: tito`): the prompt's ids, used as they are instead of the template's
     * rendering of `messages` (which still say what the conversation is, for tools and constraints).
     */
    prompt_token_ids: z.array(z.number().int().min(0)).min(1).nullish(),
  })
  .refine((body) => body.top_logprobs === undefined || body.top_logprobs === null || body.logprobs === true, {
    path: ['top_logprobs'],
    error: 'needs logprobs set to true, as vLLM and OpenAI require',
  });
export type ChatRequest = z.infer<typeof chatRequest>;

export const completionRequest = z.object({
  ...samplingFields,
  ...neutralFields,
  prompt: z.union([z.string(), z.array(z.number().int().min(0))]),
  logprobs: z.number().int().min(0).max(20).nullish(),
});
export type CompletionRequest = z.infer<typeof completionRequest>;

/** Parses a request against its fields; a field outside them is a 400 naming it. */
export function parseRequest<T extends z.ZodRawShape>(schema: z.ZodObject<T>, raw: unknown): z.infer<z.ZodObject<T>> {
  const body = schema.parse(raw);
  const unknown = Object.keys(raw as object).filter((key) => !Object.hasOwn(schema.shape, key));
  if (unknown.length > 0)
    throw new HttpError(
      400,
      'BadRequestError',
      `${unknown.join(', ')}: not supported by the embedded policy server, which would ignore ` +
        `${unknown.length > 1 ? 'them' : 'it'}; leave ${unknown.length > 1 ? 'them' : 'it'} out, ` +
        'or serve the policy with vLLM or SGLang',
    );
  return body;
}
