import type { ChatCompletionCreateParams, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { ResponsesRequest } from './shapes.js';
import { inputMessages, invalidRequest } from './input-items.js';
import type { ChatRequestBody } from '../translation.js';

/**
 * A Responses request as the chat request that asks the model for the same thing. Each field is
 * translated, taken as bookkeeping (it changes only what the answer echoes or how it is kept), or
 * refused with a 400 naming it: never dropped when it would change what the model generates.
 */

/** Fields that change nothing the model generates: echoed in the answer (or not), never sent on. */
const BOOKKEEPING = new Set([
  'metadata',
  'store',
  'service_tier',
  'prompt_cache_key',
  'prompt_cache_retention',
  'safety_identifier',
  'stream_options',
  // Limits calls to built-in tools, which are refused below.
  'max_tool_calls',
]);

/** Fields that need what only OpenAI's own service has: refused, each with why. */
const NEEDS_STORED_STATE: Record<string, string> = {
  previous_response_id: 'this server keeps no responses (the gateway does): send the whole conversation as input items',
  conversation: 'this server keeps no conversations (the gateway does): send the whole conversation as input items',
  background: 'this server runs no background responses (it keeps none to poll): leave background out or false',
  prompt: 'this server has no stored prompt templates: send the instructions and input themselves',
  context_management: 'this server does not compact conversations: leave context_management out',
};

const TRANSLATED = new Set([
  'model',
  'input',
  'instructions',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'max_output_tokens',
  'temperature',
  'top_p',
  'top_logprobs',
  'stream',
  'text',
  'reasoning',
  'user',
  'truncation',
  'include',
]);

/** `include` values that change nothing generated: what they add, the answer has (or, for built-in tools, lacks). */
const INCLUDABLE = new Set([
  'message.output_text.logprobs',
  'reasoning.encrypted_content',
  'file_search_call.results',
  'web_search_call.results',
  'web_search_call.action.sources',
  'message.input_image.image_url',
  'computer_call_output.output.image_url',
  'code_interpreter_call.outputs',
]);

function checkFields(request: Record<string, unknown>): void {
  for (const [field, value] of Object.entries(request)) {
    if (value === undefined || value === null) continue;
    const why = NEEDS_STORED_STATE[field];
    if (why !== undefined && value !== false) throw invalidRequest(`${field}: ${why}`);
    if (why === undefined && !BOOKKEEPING.has(field) && !TRANSLATED.has(field))
      throw invalidRequest(`${field}: not a Responses API field this server knows; leave it out`);
  }
  if (request.truncation !== undefined && request.truncation !== null && request.truncation !== 'disabled')
    throw invalidRequest(
      `truncation: ${JSON.stringify(request.truncation)} would drop input items the model was meant to see; ` +
        'only "disabled" is served (shorten the input instead)',
    );
}

function chatTools(tools: ResponsesRequest['tools']): ChatCompletionTool[] | undefined {
  if (!tools || tools.length === 0) return undefined;
  return tools.map((tool, i) => {
    if (tool.type !== 'function')
      throw invalidRequest(
        `tools[${i}]: tools of type ${JSON.stringify(tool.type)} are not supported; only function tools ` +
          '(built-in tools such as web_search, file_search or mcp run at OpenAI): give it as a function tool',
      );
    return {
      type: 'function',
      function: {
        name: tool.name,
        ...(tool.description != null && { description: tool.description }),
        ...(tool.parameters != null && { parameters: tool.parameters }),
        ...(tool.strict != null && { strict: tool.strict }),
      },
    };
  });
}

function chatToolChoice(choice: ResponsesRequest['tool_choice']): ChatCompletionCreateParams['tool_choice'] {
  if (choice === undefined || choice === null) return undefined;
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  if (choice.type === 'function' && 'name' in choice) return { type: 'function', function: { name: choice.name } };
  throw invalidRequest(
    `tool_choice: ${JSON.stringify(choice)} is not supported; use "auto", "none", "required" or ` +
      '{"type": "function", "name": …}',
  );
}

/** `text.format` as chat's `response_format`; `text.verbosity` only at its default (no chat field steers it). */
function chatResponseFormat(text: ResponsesRequest['text']): ChatCompletionCreateParams['response_format'] {
  if (text?.verbosity != null && text.verbosity !== 'medium')
    throw invalidRequest(
      `text.verbosity: ${JSON.stringify(text.verbosity)} cannot be asked of this model (no chat field steers it); ` +
        'leave it out, or say how long to answer in the instructions',
    );
  const format = text?.format;
  if (!format || format.type === 'text') return undefined;
  if (format.type === 'json_object') return { type: 'json_object' };
  if (format.type === 'json_schema') {
    const { name, schema, strict, description } = format;
    return {
      type: 'json_schema',
      json_schema: { name, schema, ...(strict != null && { strict }), ...(description && { description }) },
    };
  }
  throw invalidRequest(`text.format: type ${JSON.stringify((format as { type: unknown }).type)} is not known`);
}

function checkInclude(include: ResponsesRequest['include']): boolean {
  for (const value of include ?? [])
    if (!INCLUDABLE.has(value))
      throw invalidRequest(`include: ${JSON.stringify(value)} is not a value this server knows`);
  return include?.includes('message.output_text.logprobs') ?? false;
}

export function toChat(request: ResponsesRequest): ChatRequestBody {
  if (request === null || typeof request !== 'object' || Array.isArray(request))
    throw invalidRequest('the request body must be a JSON object');
  checkFields(request as Record<string, unknown>);
  if (typeof request.model !== 'string' || request.model === '')
    throw invalidRequest('model: name the model to answer (a served policy version)');
  if (request.input === undefined || request.input === null)
    throw invalidRequest('input: send a string (one user message) or a list of input items');
  const logprobs = checkInclude(request.include) || request.top_logprobs != null;
  const tools = chatTools(request.tools);
  const toolChoice = chatToolChoice(request.tool_choice);
  const responseFormat = chatResponseFormat(request.text);
  const effort = request.reasoning?.effort;
  return {
    model: request.model,
    messages: inputMessages(request.input, request.instructions),
    ...(tools && { tools }),
    ...(toolChoice !== undefined && { tool_choice: toolChoice }),
    ...(request.parallel_tool_calls != null && { parallel_tool_calls: request.parallel_tool_calls }),
    ...(request.max_output_tokens != null && { max_tokens: request.max_output_tokens }),
    ...(request.temperature != null && { temperature: request.temperature }),
    ...(request.top_p != null && { top_p: request.top_p }),
    ...(logprobs && { logprobs: true }),
    ...(request.top_logprobs != null && { top_logprobs: request.top_logprobs }),
    ...(responseFormat && { response_format: responseFormat }),
    // The chat API's own field for it: a backend whose template takes an effort honors it, any other refuses it.
    ...(effort != null && { reasoning_effort: effort }),
    ...(request.user != null && { user: request.user }),
    // Usage comes in the stream's last chunk only when asked for; the Responses answer always carries it.
    ...(request.stream && { stream: true, stream_options: { include_usage: true } }),
  } as ChatRequestBody;
}
