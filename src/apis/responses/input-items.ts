import type { ChatCompletionContentPartText, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { textOfPart } from '../../tokenizer/content-parts.js';
import { ApiRequestError, type ChatAssistantMessage } from '../translation.js';

/**
 * The Responses API's input items as chat messages. A model turn — its reasoning item, its message
 * and its function calls, in the order the model produced them — becomes ONE assistant message
 * (reasoning_content, content, tool_calls), exactly as a chat harness sends the model's own turn
 * back: the gateway merges consecutive calls only when the re-rendered prompt starts with the
 * previous prompt and completion token for token, and a turn split in two renders differently.
 */

type Item = Record<string, unknown>;

export function invalidRequest(message: string): ApiRequestError {
  return new ApiRequestError(400, 'invalid_request_error', message);
}

const TEXT_ONLY =
  'the policy takes text only: send input_text (or output_text) parts, or the text as a string, or serve a ' +
  'multimodal model and call it through its own API';

/** A content list's texts, each part checked: text-like parts (content-parts.ts) are kept, any other is a 400. */
function partTexts(parts: unknown[], where: string): string[] {
  return parts.map((part, i) => {
    const text = textOfPart(part);
    if (text !== undefined) return text;
    const type = (part as { type?: unknown } | null)?.type;
    throw invalidRequest(
      `${where}[${i}]: content part type ${JSON.stringify(type ?? null)} is not supported; ${TEXT_ONLY}`,
    );
  });
}

/**
 * A message's content as the chat API takes it: a string stays a string, a list becomes chat text
 * parts (rendered as vLLM renders them), and one assistant output_text part becomes its string — the
 * form in which a chat harness sends the model's reply back.
 */
function contentOf(content: unknown, role: string, where: string): string | ChatCompletionContentPartText[] {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalidRequest(`${where}: content must be a string or a list of content parts`);
  const texts = partTexts(content, where);
  if (role === 'assistant' && texts.length === 1) return texts[0] as string;
  return texts.map((text) => ({ type: 'text', text }));
}

/** A reasoning item's text: its reasoning_text content, else its summary (what a client kept of it). */
function reasoningText(item: Item, where: string): string {
  const parts = (Array.isArray(item.content) && item.content.length > 0 ? item.content : item.summary) ?? [];
  if (!Array.isArray(parts)) throw invalidRequest(`${where}: summary must be a list of summary_text parts`);
  const texts = parts.map((part: { text?: unknown }) => (typeof part?.text === 'string' ? part.text : ''));
  if (texts.every((t) => t === '') && item.encrypted_content)
    throw invalidRequest(
      `${where}: a reasoning item with only encrypted_content cannot be read by this server, which never made it; ` +
        'send the reasoning as content or summary text, or leave the item out',
    );
  return texts.join('\n');
}

function functionCallOutput(item: Item, where: string): ChatCompletionMessageParam {
  if (typeof item.call_id !== 'string') throw invalidRequest(`${where}: a function_call_output needs its call_id`);
  const output = item.output;
  const content =
    typeof output === 'string'
      ? output
      : Array.isArray(output)
        ? partTexts(output, `${where}.output`).join('\n')
        : (() => {
            throw invalidRequest(`${where}.output must be a string or a list of input_text parts`);
          })();
  return { role: 'tool', tool_call_id: item.call_id, content };
}

function toolCallOf(item: Item, where: string): NonNullable<ChatAssistantMessage['tool_calls']>[number] {
  for (const field of ['call_id', 'name', 'arguments'])
    if (typeof item[field] !== 'string') throw invalidRequest(`${where}: a function_call needs a string ${field}`);
  return {
    id: item.call_id as string,
    type: 'function',
    function: { name: item.name as string, arguments: item.arguments as string },
  };
}

/** The chat messages for a list of input items; `instructions` come before them, as a system message. */
export function inputMessages(input: unknown, instructions?: string | null): ChatCompletionMessageParam[] {
  const messages: ChatCompletionMessageParam[] = [];
  if (instructions) messages.push({ role: 'system', content: instructions });
  if (typeof input === 'string') return [...messages, { role: 'user', content: input }];
  if (!Array.isArray(input)) throw invalidRequest('input: send a string (one user message) or a list of input items');
  let turn: ChatAssistantMessage | undefined; // the model turn being assembled, until another item closes it
  const openTurn = () => {
    turn = { role: 'assistant', content: null };
    messages.push(turn as ChatCompletionMessageParam);
    return turn;
  };
  input.forEach((raw: unknown, i) => {
    const where = `input[${i}]`;
    if (raw === null || typeof raw !== 'object') throw invalidRequest(`${where}: an input item must be an object`);
    const item = raw as Item;
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
    if (type === 'reasoning') {
      const text = reasoningText(item, where);
      const open = turn && turn.content === null && !turn.tool_calls && !turn.reasoning_content ? turn : openTurn();
      if (text) open.reasoning_content = text;
    } else if (type === 'message' && item.role === 'assistant') {
      const open = turn && turn.content === null && !turn.tool_calls ? turn : openTurn();
      open.content = contentOf(item.content, 'assistant', `${where}.content`) as string;
    } else if (type === 'function_call') {
      const open = turn ?? openTurn();
      (open.tool_calls ??= []).push(toolCallOf(item, where));
    } else {
      turn = undefined;
      messages.push(otherItem(item, type, where));
    }
  });
  return messages;
}

/** An item outside a model turn: a user, system or developer message, or a function call's output. */
function otherItem(item: Item, type: unknown, where: string): ChatCompletionMessageParam {
  if (type === 'function_call_output') return functionCallOutput(item, where);
  if (type === 'message') {
    const role = item.role === 'developer' ? 'system' : item.role;
    if (role !== 'user' && role !== 'system')
      throw invalidRequest(
        `${where}.role: ${JSON.stringify(item.role)} is not a message role (user, system, developer, assistant)`,
      );
    return { role, content: contentOf(item.content, role, `${where}.content`) } as ChatCompletionMessageParam;
  }
  if (type === 'item_reference')
    throw invalidRequest(
      `${where}: item_reference needs stored items, and this server keeps none; send the items themselves`,
    );
  throw invalidRequest(
    `${where}: input items of type ${JSON.stringify(type ?? null)} are not supported; the policy takes messages, ` +
      'function_call, function_call_output and reasoning items (built-in tools run at OpenAI, not here)',
  );
}
