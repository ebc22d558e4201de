import type { ChatCompletionChunk, ChatCompletionTokenLogprob } from 'openai/resources/chat/completions';
import type { Response, ResponseOutputItem, ResponseStreamEvent } from 'openai/resources/responses/responses';
import type { ChatStreamTranslator } from '../translation.js';
import { functionCallItem, messageItem, reasoningItem, statusOf } from './from-chat.js';
import {
  deltaLogprobs,
  newId,
  responseHead,
  usageOf,
  type ChatUsage,
  type ResponsesAnswer,
  type ResponsesRequest,
} from './shapes.js';

/**
 * One streamed chat completion as the Responses API's events: `response.created` and
 * `response.in_progress` with the first chunk; per output item (reasoning, message, function call,
 * in the order the model produced them) its `output_item.added`, its deltas and its `….done`
 * events; and `response.completed` (or `response.incomplete`) with the whole answer at the end —
 * the same answer `answer()` gives, with the ids the events carried. No `data: [DONE]`: OpenAI
 * sends none.
 */

type Event = ResponseStreamEvent extends infer E ? (E extends unknown ? Omit<E, 'sequence_number'> : never) : never;

/** The item whose deltas are arriving: events go to it until another kind of item begins. */
type OpenItem =
  | { kind: 'reasoning'; index: number; id: string; text: string }
  | { kind: 'message'; index: number; id: string; text: string }
  | { kind: 'function_call'; index: number; id: string; callId: string; name: string; args: string };

type ChunkDelta = ChatCompletionChunk.Choice.Delta & { reasoning_content?: string | null; reasoning?: string | null };

/** The answer as the events carry it: OpenAI's JSON has no `output_text` (the SDK adds it on reading). */
const asEventResponse = (answer: ResponsesAnswer) => answer as unknown as Response;

export class ResponsesStream implements ChatStreamTranslator<ResponsesAnswer> {
  private readonly id = newId('resp');
  private sequence = 0;
  private head: { createdAt: number; model: string } | undefined;
  private readonly output: ResponseOutputItem[] = [];
  private open: OpenItem | undefined;
  private readonly calls = new Map<number, OpenItem>();
  /** Log-probs not yet sent with a text delta; the message's, all of them. */
  private pending: ChatCompletionTokenLogprob[] = [];
  private messageLogprobs: ChatCompletionTokenLogprob[] = [];
  private withLogprobs = false;
  private finishReason: string | null = null;
  private usage: ChatUsage | undefined;
  private ended = false;

  constructor(private readonly request: ResponsesRequest) {}

  chunk(chunk: ChatCompletionChunk): string {
    if (this.ended) return '';
    let out = this.start(chunk.created, chunk.model);
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices.find((c) => c.index === 0);
    if (!choice) return out;
    const delta = choice.delta as ChunkDelta;
    const tokens = choice.logprobs?.content;
    if (tokens) {
      this.withLogprobs = true;
      this.pending.push(...tokens);
    }
    const reasoning = delta.reasoning_content ?? delta.reasoning;
    if (reasoning) out += this.reasoningDelta(reasoning);
    if (delta.content) out += this.textDelta(delta.content);
    for (const call of delta.tool_calls ?? []) out += this.toolCallDelta(call);
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    return out;
  }

  end(): string {
    if (this.ended) return '';
    let out = this.start(Math.floor(Date.now() / 1000), this.request.model ?? '');
    out += this.closeOpen(statusOf(this.finishReason).status === 'completed' ? 'completed' : 'incomplete');
    this.ended = true;
    const answer = this.answer();
    const type = answer.status === 'completed' ? 'response.completed' : 'response.incomplete';
    return out + this.send({ type, response: asEventResponse(answer) });
  }

  /**
   * Ends a stream whose generation failed after it began: `response.failed`, carrying the items
   * finished so far and the error, so no client waits for an end that never comes.
   */
  failed(message: string): string {
    if (this.ended) return '';
    let out = this.start(Math.floor(Date.now() / 1000), this.request.model ?? '');
    this.ended = true;
    const response = { ...this.answer(), status: 'failed' as const, error: { code: 'server_error' as const, message } };
    out += this.send({ type: 'response.failed', response: asEventResponse(response) });
    return out;
  }

  answer(): ResponsesAnswer {
    const { createdAt, model } = this.head ?? {
      createdAt: Math.floor(Date.now() / 1000),
      model: this.request.model ?? '',
    };
    return {
      ...responseHead(this.request, this.id, createdAt, model),
      ...(this.ended ? statusOf(this.finishReason) : { status: 'in_progress' as const }),
      output: this.output.filter((item) => item !== undefined),
      ...(this.usage && { usage: usageOf(this.usage) }),
    };
  }

  private send(event: Event): string {
    const frame = { ...event, sequence_number: this.sequence++ };
    return `event: ${event.type}\ndata: ${JSON.stringify(frame)}\n\n`;
  }

  private start(createdAt: number, model: string): string {
    if (this.head) return '';
    this.head = { createdAt, model };
    const response = asEventResponse(this.answer());
    return this.send({ type: 'response.created', response }) + this.send({ type: 'response.in_progress', response });
  }

  /** Begins an output item (ending the one before): `output_item.added`, and its content part if it has one. */
  private begin(item: OpenItem, added: ResponseOutputItem): string {
    let out = this.closeOpen('completed');
    this.open = item;
    out += this.send({ type: 'response.output_item.added', output_index: item.index, item: added });
    const where = { item_id: item.id, output_index: item.index, content_index: 0 };
    if (item.kind === 'reasoning')
      out += this.send({ type: 'response.content_part.added', ...where, part: { type: 'reasoning_text', text: '' } });
    if (item.kind === 'message')
      out += this.send({
        type: 'response.content_part.added',
        ...where,
        part: { type: 'output_text', text: '', annotations: [], ...(this.withLogprobs && { logprobs: [] }) },
      });
    return out;
  }

  private reasoningDelta(delta: string): string {
    let out = '';
    if (this.open?.kind !== 'reasoning') {
      const item = { kind: 'reasoning' as const, index: this.output.length, id: newId('rs'), text: '' };
      this.output.length++;
      out += this.begin(item, { id: item.id, type: 'reasoning', summary: [], content: [], status: 'in_progress' });
    }
    const item = this.open as Extract<OpenItem, { kind: 'reasoning' }>;
    item.text += delta;
    const where = { item_id: item.id, output_index: item.index, content_index: 0 };
    return out + this.send({ type: 'response.reasoning_text.delta', ...where, delta });
  }

  private textDelta(delta: string): string {
    let out = '';
    if (this.open?.kind !== 'message') {
      const item = { kind: 'message' as const, index: this.output.length, id: newId('msg'), text: '' };
      this.output.length++;
      this.messageLogprobs = [];
      out += this.begin(item, { id: item.id, type: 'message', role: 'assistant', status: 'in_progress', content: [] });
    }
    const item = this.open as Extract<OpenItem, { kind: 'message' }>;
    item.text += delta;
    const logprobs = this.takePending();
    const where = { item_id: item.id, output_index: item.index, content_index: 0 };
    return out + this.send({ type: 'response.output_text.delta', ...where, delta, logprobs: deltaLogprobs(logprobs) });
  }

  private takePending(): ChatCompletionTokenLogprob[] {
    const taken = this.pending;
    this.messageLogprobs.push(...taken);
    this.pending = [];
    return taken;
  }

  private toolCallDelta(call: ChatCompletionChunk.Choice.Delta.ToolCall): string {
    let out = '';
    let item = this.calls.get(call.index);
    if (!item) {
      const name = call.function?.name ?? '';
      const callId = call.id ?? newId('call');
      item = { kind: 'function_call', index: this.output.length, id: newId('fc'), callId, name, args: '' };
      this.output.length++;
      this.calls.set(call.index, item);
      const added = { ...functionCallItem(item.id, callId, name, ''), status: 'in_progress' as const };
      out += this.begin(item, added);
    } else if (item !== this.open)
      throw new Error(`the chat stream continued tool call ${call.index} after another output item began`);
    const args = call.function?.arguments;
    if (item.kind !== 'function_call' || !args) return out;
    item.args += args;
    return (
      out +
      this.send({
        type: 'response.function_call_arguments.delta',
        item_id: item.id,
        output_index: item.index,
        delta: args,
      })
    );
  }

  /** Ends the open item: its `….done` events, and the finished item in the output. */
  private closeOpen(status: 'completed' | 'incomplete'): string {
    const item = this.open;
    if (!item) return '';
    this.open = undefined;
    const where = { item_id: item.id, output_index: item.index };
    let out = '';
    let done: ResponseOutputItem;
    if (item.kind === 'reasoning') {
      const part = { type: 'reasoning_text' as const, text: item.text };
      out += this.send({ type: 'response.reasoning_text.done', ...where, content_index: 0, text: item.text });
      out += this.send({ type: 'response.content_part.done', ...where, content_index: 0, part });
      done = reasoningItem(item.id, item.text);
    } else if (item.kind === 'message') {
      this.takePending(); // the tokens that ended the text (the end of the turn) count in its log-probs
      const message = messageItem(item.id, item.text, this.withLogprobs ? this.messageLogprobs : undefined, status);
      const logprobs = deltaLogprobs(this.messageLogprobs);
      out += this.send({ type: 'response.output_text.done', ...where, content_index: 0, text: item.text, logprobs });
      out += this.send({ type: 'response.content_part.done', ...where, content_index: 0, part: message.content[0]! });
      done = message;
    } else {
      out += this.send({
        type: 'response.function_call_arguments.done',
        ...where,
        name: item.name,
        arguments: item.args,
      });
      done = functionCallItem(item.id, item.callId, item.name, item.args);
    }
    this.output[item.index] = done;
    return out + this.send({ type: 'response.output_item.done', output_index: item.index, item: done });
  }
}
