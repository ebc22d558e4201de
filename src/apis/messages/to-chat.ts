import type { ChatCompletionTool, ChatCompletionToolChoiceOption } from 'openai/resources/chat/completions';
import type { ChatRequestBody } from '../translation.js';
import { invalidRequest } from './errors.js';
import { checkedRequest, type MessagesRequest } from './request.js';
import { chatMessagesOf } from './to-chat-messages.js';
import type { ToolArgumentsStyle } from './tool-arguments.js';

/**
 * The chat request asking for what a Messages request asks. Beyond the messages
 * (to-chat-messages.ts): `max_tokens`, `stop_sequences` → `stop`, temperature, top_p, top_k and
 * `stream` as they are (a stream asks for its usage, which message_delta reports); `tools` →
 * function tools (server tools such as `web_search_…`, `bash_…`, `text_editor_…` run at
 * Anthropic, not in a model: refused); `tool_choice` auto / any / tool / none → "auto" /
 * "required" / the named function / "none", `disable_parallel_tool_use` → `parallel_tool_calls:
 * false`; `thinking` enabled / disabled → `chat_template_kwargs.enable_thinking` true / false (the
 * switch of Qwen3-style templates; `budget_tokens` has no chat counterpart, so thinking is bounded
 * by `max_tokens` alone; `adaptive` leaves the template's default); `metadata.user_id` → `user`.
 */
export function toChat(raw: MessagesRequest, style: ToolArgumentsStyle): ChatRequestBody {
  const request = checkedRequest(raw);
  const thinking = enableThinking(request.thinking);
  const choice = request.tool_choice as { type: string; disable_parallel_tool_use?: boolean } | undefined;
  return {
    model: request.model,
    messages: chatMessagesOf(request.system, request.messages, style),
    max_tokens: request.max_tokens,
    ...(request.stop_sequences && request.stop_sequences.length > 0 && { stop: request.stop_sequences }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.top_p !== undefined && { top_p: request.top_p }),
    ...(request.top_k !== undefined && { top_k: request.top_k }),
    ...(request.tools &&
      request.tools.length > 0 && {
        tools: (request.tools as unknown as Array<Record<string, unknown>>).map(chatTool),
      }),
    ...(choice && { tool_choice: chatToolChoice(choice) }),
    ...(choice?.disable_parallel_tool_use === true && { parallel_tool_calls: false }),
    ...(thinking !== undefined && { chat_template_kwargs: { enable_thinking: thinking } }),
    ...(typeof request.metadata?.user_id === 'string' && { user: request.metadata.user_id }),
    ...(request.stream && { stream: true, stream_options: { include_usage: true } }),
  } as ChatRequestBody;
}

/** Tool fields translated, or with no effect on the prompt or the reply (caching, streaming granularity). */
const TOOL_FIELDS = new Set([
  'name',
  'description',
  'input_schema',
  'type',
  'strict',
  'cache_control',
  'eager_input_streaming',
]);

function chatTool(tool: Record<string, unknown>, i: number): ChatCompletionTool {
  const where = `tools[${i}]`;
  if (tool.type !== undefined && tool.type !== null && tool.type !== 'custom')
    throw invalidRequest(
      `${where}: ${JSON.stringify(tool.type)} is an Anthropic server tool, which runs at Anthropic and not in ` +
        'this model; define it as a custom tool (name, description, input_schema) and run it in the harness',
    );
  if (typeof tool.name !== 'string' || tool.name === '') throw invalidRequest(`${where}.name: Field required`);
  if (tool.input_schema === null || typeof tool.input_schema !== 'object')
    throw invalidRequest(`${where}.input_schema: Field required (a JSON schema object)`);
  const unknown = Object.keys(tool).filter((key) => !TOOL_FIELDS.has(key));
  if (unknown.length > 0)
    throw invalidRequest(`${where}: ${unknown.join(', ')} not supported when served from chat completions; leave out`);
  return {
    type: 'function',
    function: {
      name: tool.name,
      ...(typeof tool.description === 'string' && { description: tool.description }),
      parameters: tool.input_schema as Record<string, unknown>,
      ...(typeof tool.strict === 'boolean' && { strict: tool.strict }),
    },
  };
}

function chatToolChoice(choice: { type: string; name?: unknown }): ChatCompletionToolChoiceOption {
  switch (choice.type) {
    case 'auto':
      return 'auto';
    case 'any':
      return 'required';
    case 'none':
      return 'none';
    case 'tool':
      if (typeof choice.name !== 'string') throw invalidRequest('tool_choice.name: Field required for type "tool"');
      return { type: 'function', function: { name: choice.name } };
    default:
      throw invalidRequest(
        `tool_choice.type: ${JSON.stringify(choice.type)} is not one of "auto", "any", "tool", "none"`,
      );
  }
}

function enableThinking(thinking: MessagesRequest['thinking']): boolean | undefined {
  if (thinking === undefined) return undefined;
  if (thinking.type === 'enabled') return true;
  if (thinking.type === 'disabled') return false;
  if (thinking.type === 'adaptive') return undefined;
  throw invalidRequest(
    `thinking.type: ${JSON.stringify(thinking.type)} is not supported when served from chat completions; ` +
      'use "enabled", "disabled" or "adaptive"',
  );
}
