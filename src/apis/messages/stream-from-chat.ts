import type {
  ContentBlock,
  Message,
  MessageDeltaUsage,
  RawMessageStreamEvent,
} from '@anthropic-ai/sdk/resources/messages/messages';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { ChatStreamTranslator } from '../translation.js';
import { messageId, reasoningOf, stopOf, THINKING_SIGNATURE, toolUseBlock, usageOf } from './from-chat.js';

/** One server-sent event as Anthropic frames it: its type named on the `event:` line too. */
export function sseFrame(event: RawMessageStreamEvent | { type: 'ping' } | { type: 'error'; error: object }): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/** The block being streamed: text and thinking go out as they come, a tool call once it is whole. */
type OpenBlock =
  | { kind: 'text' | 'thinking'; text: string }
  | { kind: 'tool'; chatIndex: number; id: string | undefined; name: string; args: string };

/**
 * A streamed chat completion (its first choice) as Anthropic's events: message_start (the message
 * with no content yet) and a ping, then per block content_block_start, its deltas and
 * content_block_stop, then message_delta (stop reason, stop sequence, usage) and message_stop —
 * no `[DONE]`. Thinking and text deltas go out as they arrive; a tool call goes out when it is
 * whole (the next block begins or the stream ends), its input as one input_json_delta: the JSON of
 * the `input` the whole answer has (arguments that are not a JSON object arrive wrapped, as in
 * tool-arguments.ts, never as JSON a client cannot parse). `answer()` is what fromChat gives for
 * the same completion.
 */
export class MessageStreamTranslator implements ChatStreamTranslator<Message> {
  private readonly id = messageId();
  private readonly blocks: ContentBlock[] = [];
  private open: OpenBlock | undefined;
  private started = false;
  private promptTokens: number | undefined;
  private completionTokens = 0;
  private usage: ChatCompletionChunk['usage'];
  private finish: string | null = null;
  private vllmStop: unknown = null;

  /** @param model named until the stream names the model that answers (its first chunk's), as fromChat does. */
  constructor(private model: string) {}

  chunk(chunk: ChatCompletionChunk): string {
    if (!this.started && chunk.model) this.model = chunk.model;
    const extras = chunk as { prompt_token_ids?: number[] };
    if (extras.prompt_token_ids) this.promptTokens = extras.prompt_token_ids.length;
    if (chunk.usage) this.usage = chunk.usage;
    let out = this.start();
    const choice = chunk.choices.find((c) => c.index === 0);
    if (!choice) return out;
    this.completionTokens += (choice as { token_ids?: number[] }).token_ids?.length ?? 0;
    const reasoning = reasoningOf(choice.delta);
    if (reasoning) out += this.appendText('thinking', reasoning);
    if (choice.delta.content) out += this.appendText('text', choice.delta.content);
    for (const call of choice.delta.tool_calls ?? []) out += this.appendToolCall(call);
    if (choice.finish_reason) {
      this.finish = choice.finish_reason;
      this.vllmStop = (choice as { stop_reason?: unknown }).stop_reason ?? null;
    }
    return out;
  }

  end(): string {
    const { stop_reason, stop_sequence } = this.stop();
    const usage = this.finalUsage();
    const delta: MessageDeltaUsage = {
      input_tokens: usage.input_tokens,
      output_tokens: usage.output_tokens,
      cache_creation_input_tokens: usage.cache_creation_input_tokens,
      cache_read_input_tokens: usage.cache_read_input_tokens,
      output_tokens_details: null,
      server_tool_use: null,
    };
    return (
      this.start() +
      this.close() +
      sseFrame({
        type: 'message_delta',
        delta: { stop_reason, stop_sequence, container: null, stop_details: null },
        usage: delta,
      }) +
      sseFrame({ type: 'message_stop' })
    );
  }

  answer(): Message {
    return { ...this.message(), content: [...this.blocks], ...this.stop(), usage: this.finalUsage() };
  }

  private message(): Message {
    return {
      id: this.id,
      type: 'message',
      role: 'assistant',
      model: this.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...usageOf({ prompt_tokens: this.promptTokens ?? 0, completion_tokens: 0, total_tokens: 0 }) },
      container: null,
      diagnostics: null,
      stop_details: null,
    };
  }

  private stop() {
    const calledTools = this.blocks.some((b) => b.type === 'tool_use') || this.open?.kind === 'tool';
    return stopOf(this.finish, this.vllmStop, calledTools);
  }

  private finalUsage() {
    const prompt = this.promptTokens ?? 0;
    return usageOf(this.usage ?? { prompt_tokens: prompt, completion_tokens: this.completionTokens, total_tokens: 0 });
  }

  private start(): string {
    if (this.started) return '';
    this.started = true;
    return sseFrame({ type: 'message_start', message: this.message() }) + sseFrame({ type: 'ping' });
  }

  private appendText(kind: 'text' | 'thinking', text: string): string {
    let out = '';
    if (this.open?.kind !== kind) {
      out += this.close();
      this.open = { kind, text: '' };
      const index = this.blocks.length;
      out += sseFrame({
        type: 'content_block_start',
        index,
        content_block:
          kind === 'text'
            ? { type: 'text', text: '', citations: null }
            : { type: 'thinking', thinking: '', signature: '' },
      });
    }
    (this.open as { text: string }).text += text;
    const index = this.blocks.length;
    return (
      out +
      sseFrame({
        type: 'content_block_delta',
        index,
        delta: kind === 'text' ? { type: 'text_delta', text } : { type: 'thinking_delta', thinking: text },
      })
    );
  }

  private appendToolCall(call: ChatCompletionChunk.Choice.Delta.ToolCall): string {
    const open = this.open;
    if (open?.kind === 'tool' && open.chatIndex === call.index && !(call.id && open.id && call.id !== open.id)) {
      open.name += call.function?.name ?? '';
      open.args += call.function?.arguments ?? '';
      return '';
    }
    const out = this.close();
    this.open = {
      kind: 'tool',
      chatIndex: call.index,
      id: call.id,
      name: call.function?.name ?? '',
      args: call.function?.arguments ?? '',
    };
    return out;
  }

  /** Ends the open block: its last events, and it joins the answer's content. */
  private close(): string {
    const open = this.open;
    if (!open) return '';
    this.open = undefined;
    const index = this.blocks.length;
    if (open.kind === 'tool') {
      const block = toolUseBlock(open.id, open.name, open.args);
      this.blocks.push(block);
      return (
        sseFrame({ type: 'content_block_start', index, content_block: { ...block, input: {} } }) +
        sseFrame({
          type: 'content_block_delta',
          index,
          delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) },
        }) +
        sseFrame({ type: 'content_block_stop', index })
      );
    }
    let out = '';
    if (open.kind === 'text') this.blocks.push({ type: 'text', text: open.text, citations: null });
    else {
      this.blocks.push({ type: 'thinking', thinking: open.text, signature: THINKING_SIGNATURE });
      out += sseFrame({
        type: 'content_block_delta',
        index,
        delta: { type: 'signature_delta', signature: THINKING_SIGNATURE },
      });
    }
    return out + sseFrame({ type: 'content_block_stop', index });
  }
}
