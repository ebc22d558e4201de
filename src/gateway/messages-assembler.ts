import type { BackendResponse, JsonObject } from './openai-types.js';

/**
 * Rebuilds a Messages API answer from the events of a backend's own `/v1/messages` stream (a
 * backend set to serve the API itself), for the journal: message_start's message, each content
 * block with its deltas applied, and message_delta's stop reason and usage.
 */
export class MessagesAssembler {
  private message: JsonObject | undefined;
  private readonly blocks: JsonObject[] = [];
  private readonly partialJson = new Map<number, string[]>();

  add(event: BackendResponse): void {
    const index = typeof event.index === 'number' ? event.index : -1;
    switch (event.type) {
      case 'message_start':
        this.message = { ...(event.message as JsonObject) };
        break;
      case 'content_block_start':
        this.blocks[index] = { ...(event.content_block as JsonObject) };
        break;
      case 'content_block_delta':
        this.applyDelta(index, event.delta as JsonObject);
        break;
      case 'content_block_stop': {
        const parts = this.partialJson.get(index);
        const block = this.blocks[index];
        if (parts && block) block.input = JSON.parse(parts.join('') || '{}') as unknown;
        break;
      }
      case 'message_delta': {
        const delta = (event.delta ?? {}) as JsonObject;
        const usage = event.usage as JsonObject | undefined;
        this.message = { ...this.message, ...delta };
        if (usage && this.message) this.message.usage = { ...(this.message.usage as JsonObject), ...usage };
        break;
      }
    }
  }

  private applyDelta(index: number, delta: JsonObject): void {
    const block = this.blocks[index];
    if (!block) throw new Error(`a content_block_delta for block ${index}, which never started`);
    if (delta.type === 'text_delta') block.text = `${String(block.text ?? '')}${String(delta.text)}`;
    else if (delta.type === 'thinking_delta')
      block.thinking = `${String(block.thinking ?? '')}${String(delta.thinking)}`;
    else if (delta.type === 'signature_delta') block.signature = delta.signature;
    else if (delta.type === 'input_json_delta') {
      const parts = this.partialJson.get(index) ?? [];
      parts.push(String(delta.partial_json));
      this.partialJson.set(index, parts);
    }
  }

  response(): BackendResponse {
    return this.message ? { ...this.message, content: this.blocks.filter(Boolean) } : {};
  }
}
