import type { CallEndpoint } from '../store/trace-store.js';
import { MessagesAssembler } from './messages-assembler.js';
import type { BackendChoice, BackendResponse, JsonObject, TokenLogprob } from './openai-types.js';

interface ChoiceParts {
  index: number;
  role: string | undefined;
  content: string[];
  reasoning: string[];
  text: string[];
  toolCalls: Map<number, { id?: string; type?: string; name: string[]; arguments: string[] }>;
  tokenIds: number[] | null;
  promptIds: number[] | null;
  chatLogprobs: TokenLogprob[] | null;
  tokenLogprobs: number[] | null;
  finishReason: string | null;
  stopReason: unknown;
}

/** Rebuilds the complete response from stream chunks, for the journal. */
export class StreamAssembler {
  private head: BackendResponse = {};
  private promptIds: number[] | null = null;
  private usage: unknown = null;
  private readonly choices = new Map<number, ChoiceParts>();
  private completed: BackendResponse | undefined;
  private readonly messages = new MessagesAssembler();

  constructor(private readonly endpoint: CallEndpoint) {}

  add(chunk: BackendResponse): void {
    if (this.endpoint === 'messages') return this.messages.add(chunk);
    if (this.endpoint === 'responses') {
      if (chunk.type === 'response.completed' && chunk.response) this.completed = chunk.response as BackendResponse;
      return;
    }
    if (!this.head.id) this.head = { id: chunk.id, created: chunk.created, model: chunk.model };
    if (Array.isArray(chunk.prompt_token_ids)) this.promptIds = chunk.prompt_token_ids;
    if (chunk.usage) this.usage = chunk.usage;
    for (const choice of chunk.choices ?? []) this.addChoice(choice);
  }

  response(): BackendResponse {
    if (this.endpoint === 'messages') return this.messages.response();
    if (this.endpoint === 'responses') return this.completed ?? {};
    const chat = this.endpoint === 'chat.completions';
    const choices = [...this.choices.values()]
      .sort((a, b) => a.index - b.index)
      .map((c) => {
        const out: BackendChoice = { index: c.index, finish_reason: c.finishReason };
        if (chat) {
          // As in a non-streamed response: a reply that is only tool calls has null content.
          const text = c.content.join('');
          const content = text !== '' ? text : c.toolCalls.size > 0 || c.content.length === 0 ? null : '';
          const message: JsonObject = { role: c.role ?? 'assistant', content };
          if (c.reasoning.length) message.reasoning_content = c.reasoning.join('');
          if (c.toolCalls.size) {
            message.tool_calls = [...c.toolCalls.entries()]
              .sort(([a], [b]) => a - b)
              .map(([, call]) => ({
                id: call.id,
                type: call.type ?? 'function',
                function: { name: call.name.join(''), arguments: call.arguments.join('') },
              }));
          }
          out.message = message;
          out.logprobs = c.chatLogprobs ? { content: c.chatLogprobs } : null;
        } else {
          out.text = c.text.join('');
          out.logprobs = c.tokenLogprobs ? { token_logprobs: c.tokenLogprobs } : null;
          if (c.promptIds) out.prompt_token_ids = c.promptIds;
        }
        if (c.stopReason !== undefined) out.stop_reason = c.stopReason;
        if (c.tokenIds) out.token_ids = c.tokenIds;
        return out;
      });
    const response: BackendResponse = { ...this.head, object: chat ? 'chat.completion' : 'text_completion', choices };
    if (this.promptIds) response.prompt_token_ids = this.promptIds;
    if (this.usage) response.usage = this.usage;
    return response;
  }

  private addChoice(choice: BackendChoice): void {
    const index = choice.index ?? 0;
    let parts = this.choices.get(index);
    if (!parts) {
      parts = {
        index,
        role: undefined,
        content: [],
        reasoning: [],
        text: [],
        toolCalls: new Map(),
        tokenIds: null,
        promptIds: null,
        chatLogprobs: null,
        tokenLogprobs: null,
        finishReason: null,
        stopReason: undefined,
      };
      this.choices.set(index, parts);
    }
    const delta = choice.delta;
    if (delta) {
      if (typeof delta.role === 'string') parts.role = delta.role;
      if (typeof delta.content === 'string') parts.content.push(delta.content);
      const reasoning = delta.reasoning_content ?? delta.reasoning;
      if (typeof reasoning === 'string') parts.reasoning.push(reasoning);
      for (const call of delta.tool_calls ?? []) {
        const at = (call.index as number) ?? 0;
        let entry = parts.toolCalls.get(at);
        if (!entry) parts.toolCalls.set(at, (entry = { name: [], arguments: [] }));
        if (typeof call.id === 'string') entry.id = call.id;
        if (typeof call.type === 'string') entry.type = call.type;
        const fn = call.function as { name?: unknown; arguments?: unknown } | null | undefined;
        if (typeof fn?.name === 'string') entry.name.push(fn.name);
        if (typeof fn?.arguments === 'string') entry.arguments.push(fn.arguments);
      }
    }
    if (typeof choice.text === 'string') parts.text.push(choice.text);
    if (Array.isArray(choice.token_ids)) (parts.tokenIds ??= []).push(...choice.token_ids);
    if (Array.isArray(choice.prompt_token_ids)) parts.promptIds = choice.prompt_token_ids;
    const logprobs = choice.logprobs;
    if (logprobs && Array.isArray(logprobs.content)) (parts.chatLogprobs ??= []).push(...logprobs.content);
    if (logprobs && Array.isArray(logprobs.token_logprobs)) {
      (parts.tokenLogprobs ??= []).push(...(logprobs.token_logprobs as number[]));
    }
    if (typeof choice.finish_reason === 'string') parts.finishReason = choice.finish_reason;
    if (choice.stop_reason !== undefined && choice.stop_reason !== null) parts.stopReason = choice.stop_reason;
  }
}
