/**
 * Requests of a multi-turn rollout resend the whole conversation every turn. Stored whole, the
 * journal would grow with the square of the rollout's length; instead a request whose
 * conversation starts with the previous call's conversation stores only the new items and a
 * reference, and the request as sent is stored as a patch over the request as received.
 */
type Json = Record<string, unknown>;

/** The field holding the conversation: chat `messages`, or responses `input` when it is a list. */
export function conversationField(body: Json): 'messages' | 'input' | null {
  if (Array.isArray(body.messages)) return 'messages';
  if (Array.isArray(body.input)) return 'input';
  return null;
}

export interface ConversationBase {
  callId: string;
  /** Each item of that call's conversation, serialized. */
  items: string[];
}

export interface EncodedRequest {
  /** The request as received, its conversation cut to the items after the shared prefix. */
  received: string;
  /** What the request as sent changed: keys set to new values, keys removed. */
  sentPatch: string;
  conversation: { field: 'messages' | 'input'; ref: string | null; prefix: number } | null;
  /** This call's whole conversation, serialized, to be the base of the next call. */
  items: string[] | null;
}

export function encodeRequest(received: Json, sent: Json, base: ConversationBase | undefined): EncodedRequest {
  const field = conversationField(received);
  const patch: { set: Json; unset: string[] } = { set: {}, unset: [] };
  for (const [key, value] of Object.entries(sent)) {
    if (value !== received[key] && JSON.stringify(value) !== JSON.stringify(received[key])) patch.set[key] = value;
  }
  for (const key of Object.keys(received)) if (!(key in sent)) patch.unset.push(key);
  const sentPatch = JSON.stringify(patch);
  if (!field) return { received: JSON.stringify(received), sentPatch, conversation: null, items: null };

  const list = received[field] as unknown[];
  const items = list.map((item) => JSON.stringify(item));
  let prefix = 0;
  if (base) {
    const n = Math.min(items.length, base.items.length);
    while (prefix < n && items[prefix] === base.items[prefix]) prefix++;
  }
  const ref = prefix > 0 && base ? base.callId : null;
  return {
    received: JSON.stringify({ ...received, [field]: ref ? list.slice(prefix) : list }),
    sentPatch,
    conversation: { field, ref, prefix: ref ? prefix : 0 },
    items,
  };
}

export function decodeRequest(
  stored: { received: string; sentPatch: string; conversation: EncodedRequest['conversation'] },
  itemsOf: (callId: string) => string[],
): { received: Json; sent: Json; items: string[] | null } {
  const received = JSON.parse(stored.received) as Json;
  let items: string[] | null = null;
  const { conversation } = stored;
  if (conversation) {
    const suffix = (received[conversation.field] as unknown[]).map((item) => JSON.stringify(item));
    if (conversation.ref) {
      const base = itemsOf(conversation.ref);
      if (base.length < conversation.prefix) {
        throw new Error(
          `journal corrupt: call ${conversation.ref} has ${base.length} conversation items, fewer than the ${conversation.prefix} referenced`,
        );
      }
      items = [...base.slice(0, conversation.prefix), ...suffix];
      received[conversation.field] = items.map((item) => JSON.parse(item) as unknown);
    } else {
      items = suffix;
    }
  }
  const patch = JSON.parse(stored.sentPatch) as { set: Json; unset: string[] };
  const sent: Json = { ...received, ...patch.set };
  for (const key of patch.unset) delete sent[key];
  return { received, sent, items };
}
