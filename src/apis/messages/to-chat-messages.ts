import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { textOfPart } from '../../tokenizer/content-parts.js';
import type { ChatAssistantMessage } from '../translation.js';
import { invalidRequest } from './errors.js';
import { argumentsOfInput, type ToolArgumentsStyle } from './tool-arguments.js';

/**
 * The Messages history as chat messages. Blocks become what a chat template is given:
 * - `text` → text content (one block: a string; several: text parts, which vLLM and Rein's
 *   tokenizer join with "\n", as they would the same texts sent to chat);
 * - an assistant turn's `thinking` → `reasoning_content` (several joined with "\n"), its
 *   `tool_use` blocks → the `tool_calls` of the same one assistant message, its texts → content
 *   (several joined with "\n", as vLLM joins text parts);
 * - a user turn's `tool_result` blocks → `tool` messages, in order, then its other blocks as a
 *   user message. A result with `is_error: true` reads `Error: <its text>`, so the model sees
 *   that the call failed (chat has no error flag; this is how it learns of one).
 * Refused, naming the block: `redacted_thinking` (Anthropic's encrypted reasoning, which no
 * other model can read: drop it from the history), media (`image`, `document`) and server-tool
 * blocks — this translation serves text-only chat.
 */
export function chatMessagesOf(
  system: unknown,
  messages: ReadonlyArray<{ role: string; content: unknown }>,
  style: ToolArgumentsStyle,
): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  if (system !== undefined && system !== '') out.push({ role: 'system', content: textContent(system, 'system') });
  messages.forEach((message, i) => {
    const where = `messages[${i}]`;
    if (message.role === 'user') out.push(...userMessages(message.content, where));
    else if (message.role === 'assistant')
      out.push(assistantChatMessage(message.content, where, style) as ChatCompletionMessageParam);
    else if (message.role === 'system') out.push({ role: 'system', content: textContent(message.content, where) });
    else throw invalidRequest(`${where}.role: must be "user" or "assistant", not ${JSON.stringify(message.role)}`);
  });
  return out;
}

type Block = Record<string, unknown> & { type?: unknown };

function blocksOf(content: unknown, where: string): Block[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw invalidRequest(`${where}.content: must be a string or an array of content blocks`);
  return content.map((block: unknown, j) => {
    if (block === null || typeof block !== 'object' || Array.isArray(block))
      throw invalidRequest(`${where}.content[${j}]: a content block must be an object with a "type"`);
    return block as Block;
  });
}

function refusedBlock(block: Block, where: string): never {
  const type = typeof block.type === 'string' ? block.type : JSON.stringify(block.type);
  if (type === 'redacted_thinking')
    throw invalidRequest(
      `${where}: a redacted_thinking block holds Anthropic's encrypted reasoning, which this model cannot ` +
        'read; leave it out of the history',
    );
  throw invalidRequest(
    `${where}: content block type ${JSON.stringify(type)} is not supported here: this model takes text ` +
      '(text, tool_use, tool_result, thinking blocks) only; send images and documents to a multimodal model',
  );
}

/** The texts of text blocks (or a string), refusing any other block. */
function textsOf(content: unknown, where: string): string[] {
  return blocksOf(content, where).map((block, j) => {
    const text = block.type === 'text' ? textOfPart(block) : undefined;
    return text ?? refusedBlock(block, `${where}.content[${j}]`);
  });
}

/** Text blocks (or a string) as chat content: a string, or text parts where there are several. */
function textContent(content: unknown, where: string): string | Array<{ type: 'text'; text: string }> {
  if (typeof content === 'string') return content;
  const texts = textsOf(content, where);
  if (texts.length === 1) return texts[0] as string;
  return texts.map((text) => ({ type: 'text' as const, text }));
}

/** A user turn: its tool results as tool messages, then the rest of it as one user message. */
function userMessages(content: unknown, where: string): ChatCompletionMessageParam[] {
  const tools: ChatCompletionMessageParam[] = [];
  const rest: Block[] = [];
  blocksOf(content, where).forEach((block, j) => {
    if (block.type !== 'tool_result') return rest.push(block);
    const at = `${where}.content[${j}]`;
    if (typeof block.tool_use_id !== 'string') throw invalidRequest(`${at}.tool_use_id: Field required`);
    tools.push({ role: 'tool', tool_call_id: block.tool_use_id, content: toolResultText(block, at) });
  });
  if (rest.length === 0 && tools.length > 0) return tools;
  return [...tools, { role: 'user', content: textContent(typeof content === 'string' ? content : rest, where) }];
}

/** A tool result's text as the model reads it: its texts joined with "\n" (as vLLM joins a tool message's parts). */
function toolResultText(block: Block, where: string): string {
  const content = block.content ?? '';
  const text =
    typeof content === 'string'
      ? content
      : textsOf(content, where)
          .filter((t) => t !== '')
          .join('\n');
  return block.is_error === true ? (text ? `Error: ${text}` : 'Error') : text;
}

/** An assistant turn: texts → content, thinking → reasoning_content, tool_use → tool_calls, as one message. */
export function assistantChatMessage(content: unknown, where: string, style: ToolArgumentsStyle): ChatAssistantMessage {
  const texts: string[] = [];
  const thinking: string[] = [];
  const toolCalls: NonNullable<ChatAssistantMessage['tool_calls']> = [];
  blocksOf(content, where).forEach((block, j) => {
    const at = `${where}.content[${j}]`;
    if (block.type === 'text' && typeof block.text === 'string') texts.push(block.text);
    else if (block.type === 'thinking' && typeof block.thinking === 'string') thinking.push(block.thinking);
    else if (block.type === 'tool_use') {
      if (typeof block.id !== 'string' || typeof block.name !== 'string')
        throw invalidRequest(`${at}: a tool_use block needs its "id" and "name"`);
      const args = argumentsOfInput(block.input, style);
      toolCalls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: args } });
    } else refusedBlock(block, at);
  });
  // Joined as vLLM joins text parts: empty ones skipped, the rest with "\n".
  const text = texts.filter((t) => t !== '');
  return {
    role: 'assistant',
    content: text.length === 0 ? (toolCalls.length > 0 ? null : '') : text.join('\n'),
    ...(thinking.length > 0 && { reasoning_content: thinking.join('\n') }),
    ...(toolCalls.length > 0 && { tool_calls: toolCalls }),
  };
}
