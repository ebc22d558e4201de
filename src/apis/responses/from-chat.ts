import type { ChatCompletionTokenLogprob } from 'openai/resources/chat/completions';
import type {
  ResponseFunctionToolCall,
  ResponseOutputItem,
  ResponseOutputMessage,
  ResponseReasoningItem,
} from 'openai/resources/responses/responses';
import type { ChatAssistantMessage } from '../translation.js';
import {
  newId,
  partLogprobs,
  responseHead,
  usageOf,
  type ChatUsage,
  type ResponsesAnswer,
  type ResponsesRequest,
} from './shapes.js';

/**
 * A whole chat completion as a Responses answer, and back: the answer's output items in the order
 * the model produced them (reasoning, text, function calls), the chat extras (token ids) left out.
 */

/** The parts of a chat completion the answer is made of (vLLM's and the embedded server's replies both fit). */
export interface ChatAnswer {
  created: number;
  model: string;
  choices: Array<{
    message: {
      content?: string | null;
      reasoning_content?: string | null;
      reasoning?: string | null;
      tool_calls?: Array<{ id: string; type?: string; function?: { name: string; arguments: string } }> | null;
    };
    finish_reason: string | null;
    logprobs?: { content?: ChatCompletionTokenLogprob[] | null } | null;
  }>;
  usage?: ChatUsage | null;
}

/** The status a finish reason gives the answer; a cut-off answer is incomplete, with why. */
export function statusOf(finishReason: string | null): Pick<ResponsesAnswer, 'status' | 'incomplete_details'> {
  if (finishReason === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finishReason === 'content_filter')
    return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

export function reasoningItem(id: string, text: string): ResponseReasoningItem {
  return { id, type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text }], status: 'completed' };
}

export function messageItem(
  id: string,
  text: string,
  logprobs: ChatCompletionTokenLogprob[] | undefined,
  status: ResponseOutputMessage['status'],
): ResponseOutputMessage {
  const part = {
    type: 'output_text' as const,
    text,
    annotations: [],
    ...(logprobs && { logprobs: partLogprobs(logprobs) }),
  };
  return { id, type: 'message', role: 'assistant', status, content: [part] };
}

export function functionCallItem(id: string, callId: string, name: string, args: string): ResponseFunctionToolCall {
  return { id, type: 'function_call', status: 'completed', call_id: callId, name, arguments: args };
}

export function fromChat(chat: ChatAnswer, request: ResponsesRequest): ResponsesAnswer {
  const choice = chat.choices[0];
  if (!choice) throw new Error('the chat completion has no choices to answer with');
  const { message } = choice;
  const status = statusOf(choice.finish_reason);
  const output: ResponseOutputItem[] = [];
  const reasoning = message.reasoning_content ?? message.reasoning;
  if (reasoning) output.push(reasoningItem(newId('rs'), reasoning));
  if (message.content) {
    const logprobs = choice.logprobs?.content ?? undefined;
    const itemStatus = status.status === 'completed' ? 'completed' : 'incomplete';
    output.push(messageItem(newId('msg'), message.content, logprobs, itemStatus));
  }
  for (const call of message.tool_calls ?? []) {
    // Only function tools are ever sent to the backend (toChat), so only function calls come back.
    if (!call.function) throw new Error(`the chat completion has a ${call.type ?? 'non-function'} tool call`);
    output.push(functionCallItem(newId('fc'), call.id, call.function.name, call.function.arguments));
  }
  return {
    ...responseHead(request, newId('resp'), chat.created, chat.model),
    ...status,
    output,
    ...(chat.usage && { usage: usageOf(chat.usage) }),
  };
}

/** The chat assistant message an answer holds: its texts joined, its function calls, its reasoning. */
export function assistantMessageOf(answer: Pick<ResponsesAnswer, 'output'>): ChatAssistantMessage {
  const texts: string[] = [];
  const reasoning: string[] = [];
  const toolCalls: NonNullable<ChatAssistantMessage['tool_calls']> = [];
  for (const item of answer.output) {
    if (item.type === 'message')
      for (const part of item.content) texts.push(part.type === 'output_text' ? part.text : part.refusal);
    else if (item.type === 'reasoning')
      reasoning.push((item.content?.length ? item.content : item.summary).map((part) => part.text).join('\n'));
    else if (item.type === 'function_call')
      toolCalls.push({ id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } });
  }
  return {
    role: 'assistant',
    content: texts.length > 0 ? texts.join('') : null,
    ...(reasoning.length > 0 && { reasoning_content: reasoning.join('\n') }),
    ...(toolCalls.length > 0 && { tool_calls: toolCalls }),
  };
}
