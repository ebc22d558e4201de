/**
 * The stand-in's deterministic toy "model", so tests know what to expect. Tokenizer: one token per
 * UTF-16 code unit, id = char code; each token's log-prob follows from its id. Chat template:
 * `<|role|>content<|end|>` per message, tool calls as `<tool_call>{json}</tool_call>`, then
 * `<|assistant|>`.
 */
export type Json = Record<string, unknown>;

export interface Message {
  role: string;
  content?: string | null;
  tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
}

/** One choice's reply, with why it ended as vLLM reports it (finish_reason, stop_reason). */
export interface Completion {
  text: string;
  toolCall?: { name: string; arguments: string };
  finishReason: string;
  stopReason?: string;
}

export const MODEL = 'toy-model';

export function tokenize(text: string): number[] {
  return Array.from({ length: text.length }, (_, i) => text.charCodeAt(i));
}

export function renderChat(messages: Message[]): string {
  const parts = messages.map((m) => {
    const calls = (m.tool_calls ?? []).map(
      (c) =>
        `<tool_call>${JSON.stringify({ name: c.function.name, arguments: JSON.parse(c.function.arguments) })}</tool_call>`,
    );
    return `<|${m.role}|>${m.content ?? ''}${calls.join('')}<|end|>`;
  });
  return `${parts.join('')}<|assistant|>`;
}

export function logprobOf(id: number): number {
  return -0.01 * (1 + (id % 7));
}

export function chatReply(body: Json, index: number): Completion {
  const messages = body.messages as Message[];
  const last = messages[messages.length - 1];
  const tools = body.tools as
    Array<{ function: { name: string; parameters?: { properties?: Record<string, unknown> } } }> | undefined;
  if (tools?.length && last?.role === 'user') {
    // The user's message becomes the tool's first parameter (or `expression`).
    const param = Object.keys(tools[0]!.function.parameters?.properties ?? {})[0] ?? 'expression';
    const args = JSON.stringify({ [param]: last.content ?? '' });
    return {
      text: `<tool_call>${JSON.stringify({ name: tools[0]!.function.name, arguments: JSON.parse(args) })}</tool_call>`,
      toolCall: { name: tools[0]!.function.name, arguments: args },
      finishReason: 'tool_calls',
    };
  }
  const base = last?.role === 'tool' ? `The answer is ${last.content}.` : `Echo: ${last?.content ?? ''}`;
  return limit(index ? `${base} #${index}` : base, body);
}

/** The reply for a completions prompt: its last ten characters, upper-cased. */
export function completionReply(body: Json, index: number): Completion {
  const prompt = String(body.prompt);
  return limit(` -> ${prompt.slice(-10).toUpperCase()}${index ? ` #${index}` : ''}`, body);
}

/** Cuts a reply at the first stop sequence, else at max_tokens. */
function limit(text: string, body: Json): Completion {
  for (const stop of ([] as string[]).concat((body.stop as string | string[] | undefined) ?? [])) {
    const at = text.indexOf(stop);
    if (at >= 0) return { text: text.slice(0, at), finishReason: 'stop', stopReason: stop };
  }
  const max = (body.max_tokens ?? body.max_completion_tokens) as number | undefined;
  if (max !== undefined && text.length > max) return { text: text.slice(0, max), finishReason: 'length' };
  return { text, finishReason: 'stop' };
}
