import { randomBytes } from 'node:crypto';
import type {
  ContentBlock,
  Message,
  StopReason,
  ToolUseBlock,
  Usage,
} from '@anthropic-ai/sdk/resources/messages/messages';
import type { ChatCompletion, ChatCompletionMessageToolCall } from 'openai/resources/chat/completions';
import type { ChatAssistantMessage } from '../translation.js';
import { assistantChatMessage } from './to-chat-messages.js';
import { inputOfArguments, type ToolArgumentsStyle } from './tool-arguments.js';

/**
 * A thinking block's `signature`: Anthropic signs its models' thinking so that it can check it when
 * sent back; an open model's reasoning has no signature, and toChat never checks one. A fixed,
 * non-empty marker, so clients that drop unsigned thinking keep it and anyone can tell it apart.
 */
export const THINKING_SIGNATURE = 'rein-unsigned';

/** `msg_` and 24 hex digits, as Anthropic's message ids look. */
export function messageId(): string {
  return `msg_${randomBytes(12).toString('hex')}`;
}

/** A chat tool call id kept as the tool_use id where Anthropic would take it, else a new `toolu_` one. */
export function toolUseId(chatId: string | undefined): string {
  return chatId && /^[A-Za-z0-9_-]{1,64}$/.test(chatId) ? chatId : `toolu_${randomBytes(12).toString('hex')}`;
}

/** A chat choice's end as Messages tells it; vLLM's `stop_reason` holds the stop string that matched. */
export function stopOf(
  finish: string | null | undefined,
  vllmStop: unknown,
  calledTools: boolean,
): { stop_reason: StopReason; stop_sequence: string | null } {
  if (calledTools || finish === 'tool_calls') return { stop_reason: 'tool_use', stop_sequence: null };
  if (finish === 'length') return { stop_reason: 'max_tokens', stop_sequence: null };
  if (finish === 'content_filter') return { stop_reason: 'refusal', stop_sequence: null };
  if (typeof vllmStop === 'string') return { stop_reason: 'stop_sequence', stop_sequence: vllmStop };
  return { stop_reason: 'end_turn', stop_sequence: null };
}

/** Chat usage as Anthropic counts it: cached prompt tokens apart from `input_tokens`. */
export function usageOf(usage: ChatCompletion['usage'] | null | undefined): Usage {
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    input_tokens: (usage?.prompt_tokens ?? 0) - cached,
    output_tokens: usage?.completion_tokens ?? 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
    cache_creation: null,
    inference_geo: null,
    output_tokens_details: null,
    server_tool_use: null,
    service_tier: 'standard',
    speed: null,
  };
}

/** A tool call as a tool_use block. */
export function toolUseBlock(id: string | undefined, name: string, args: string): ToolUseBlock {
  return { type: 'tool_use', id: toolUseId(id), name, input: inputOfArguments(args), caller: { type: 'direct' } };
}

/** The reasoning a chat message carries: vLLM's `reasoning_content`, or `reasoning` in newer versions. */
export function reasoningOf(message: object): string | undefined {
  const fields = message as { reasoning_content?: unknown; reasoning?: unknown };
  const reasoning = fields.reasoning_content ?? fields.reasoning;
  return typeof reasoning === 'string' && reasoning !== '' ? reasoning : undefined;
}

/**
 * The Message for a whole chat completion (its first choice); vLLM's token ids stay out. Its
 * `model` is the one that answered (the chat answer's), as Anthropic names the model behind an
 * alias and as the chat and Responses answers do; the request's only if the answer names none.
 */
export function fromChat(chat: ChatCompletion, request: { model: string }): Message {
  const choice = chat.choices[0];
  const message = choice?.message;
  const content: ContentBlock[] = [];
  const reasoning = message && reasoningOf(message);
  if (reasoning) content.push({ type: 'thinking', thinking: reasoning, signature: THINKING_SIGNATURE });
  if (message?.content) content.push({ type: 'text', text: message.content, citations: null });
  const calls = (message?.tool_calls ?? []).filter(
    (call): call is ChatCompletionMessageToolCall & { type: 'function' } => call.type === 'function',
  );
  for (const call of calls) content.push(toolUseBlock(call.id, call.function.name, call.function.arguments));
  const vllmStop = (choice as { stop_reason?: unknown } | undefined)?.stop_reason;
  return {
    id: messageId(),
    type: 'message',
    role: 'assistant',
    model: chat.model || request.model,
    content,
    ...stopOf(choice?.finish_reason, vllmStop, calls.length > 0),
    usage: usageOf(chat.usage),
    container: null,
    diagnostics: null,
    stop_details: null,
  };
}

/** The chat assistant message a Message holds: what the next chat request's history carries for it. */
export function assistantMessageOf(answer: Message, style: ToolArgumentsStyle): ChatAssistantMessage {
  return assistantChatMessage(answer.content, 'content', style);
}
