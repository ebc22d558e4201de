/**
 * Chat messages whose `content` is an array of parts (`[{"type": "text", "text": …}, …]`, as
 * smolagents, Claude Code and many SDKs send every message), turned into what a chat template is
 * given, the way vLLM does it, so that Rein renders such a conversation to the same token ids as
 * the engine did and as the same conversation with string contents.
 *
 * Followed: vLLM `vllm/entrypoints/chat_utils.py`, `_parse_chat_message_content` →
 * `_parse_chat_message_content_parts` → `_parse_chat_message_content_part`, and the content
 * format vLLM detects from the template (`_detect_content_format`: `vllm/renderers/hf.py` now,
 * `vllm/entrypoints/chat_utils.py` before):
 * - "string" (the template never loops over `message.content`): a missing or null content is an
 *   empty list; a string content is one text part; each part's text is taken (`text`, `input_text`
 *   and `output_text` parts: `text`; `refusal`: `refusal`; `thinking`: `thinking`; a bare string
 *   part as it is), empty or missing texts are skipped (`if parse_res:`), and the rest are joined
 *   with a single "\n": `"\n".join(texts)`. So `null` becomes `""`, and `[a, b]` becomes `a\nb`.
 * - "openai" (the template loops over `message.content`): the same texts stay a list of
 *   `{"type": "text", "text": …}` dicts (a string content too); a tool message whose parts are all
 *   text is joined with "\n" into a string.
 * Media parts (image_url, input_audio, video_url, file, …) vLLM hands to a multimodal processor;
 * a Rein tokenizer renders text only, so they are refused (ContentPartError, a 400), as is a part
 * of a type vLLM does not know ("Unsupported chat content part type").
 */

export type ContentFormat = 'string' | 'openai';

type Message = Record<string, unknown>;

/** A content part a text-only chat template cannot take; answered 400 by the servers. */
export class ContentPartError extends Error {
  readonly statusCode = 400;
  constructor(
    readonly partType: string,
    message: string,
  ) {
    super(message);
    this.name = 'ContentPartError';
  }
}

/** The field holding each text-like part type's text (vLLM's MM_PARSER_MAP text entries). */
const TEXT_FIELD: Record<string, string> = {
  text: 'text',
  input_text: 'text',
  output_text: 'text',
  refusal: 'refusal',
  thinking: 'thinking',
};

/** Keys that mark a part without `type` as media (vLLM's `_parse_chat_message_content_mm_part`). */
const MEDIA_KEYS = ['image_url', 'image_pil', 'image_embeds', 'audio_embeds', 'audio_url', 'input_audio', 'video_url'];

const FIX =
  'this model takes text only: send the message content as a string or as text parts ' +
  '({"type": "text", "text": "…"}), or serve a multimodal model (vLLM) for other parts';

/**
 * vLLM's `_detect_content_format`, on the template's source: "openai" when a `for` loop runs over
 * the `content` of a message variable (a loop target over `messages`, or over a variable set from
 * it, such as `loop_messages`), else "string".
 */
export function detectContentFormat(template: string): ContentFormat {
  const messageLists = new Set(['messages']);
  for (const m of template.matchAll(/\bset\s+(\w+)\s*=\s*(\w+)/g))
    if (messageLists.has(m[2] as string)) messageLists.add(m[1] as string);
  const messageVars = new Set<string>();
  for (const m of template.matchAll(/\bfor\s+(\w+)\s+in\s+(\w+)/g))
    if (messageLists.has(m[2] as string)) messageVars.add(m[1] as string);
  for (const m of template.matchAll(/\bfor\s+\w+\s+in\s+(\w+)\s*(?:\.\s*content\b|\[\s*(['"])content\2\s*\])/g))
    if (messageVars.has(m[1] as string)) return 'openai';
  return 'string';
}

/** A text-like part's text (vLLM's text part types), else undefined: for readers that describe parts. */
export function textOfPart(part: unknown): string | undefined {
  if (typeof part === 'string') return part;
  if (part === null || typeof part !== 'object' || Array.isArray(part)) return undefined;
  const fields = part as Record<string, unknown>;
  const field = typeof fields.type === 'string' ? TEXT_FIELD[fields.type] : undefined;
  const text = field === undefined ? undefined : fields[field];
  return typeof text === 'string' ? text : undefined;
}

/** One part's text (null when vLLM skips it), or a ContentPartError for a part that is not text. */
function partText(part: unknown, where: string): string | null {
  if (typeof part === 'string') return part === '' ? null : part;
  if (part === null || typeof part !== 'object' || Array.isArray(part))
    throw new ContentPartError('(none)', `${where}: a content part must be an object with a "type"; ${FIX}`);
  const fields = part as Record<string, unknown>;
  const type = fields.type;
  if (type === undefined || type === null) {
    const media = MEDIA_KEYS.find((key) => key in fields);
    throw new ContentPartError(
      media ?? '(none)',
      media
        ? `${where}: content part type '${media}' is not supported; ${FIX}`
        : `${where}: a content part has no "type"; ${FIX}`,
    );
  }
  const field = typeof type === 'string' ? TEXT_FIELD[type] : undefined;
  if (!field) {
    const name = typeof type === 'string' ? type : JSON.stringify(type);
    throw new ContentPartError(name, `${where}: content part type '${name}' is not supported; ${FIX}`);
  }
  const text = fields[field];
  if (text === undefined || text === null || text === '') return null;
  if (typeof text !== 'string')
    throw new ContentPartError(type as string, `${where}: a '${type as string}' part's "${field}" must be a string`);
  return text;
}

function contentTexts(content: unknown, where: string): string[] {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return content === '' ? [] : [content];
  if (!Array.isArray(content))
    throw new ContentPartError('(none)', `${where}: content must be a string, an array of parts, or null`);
  return content.flatMap((part, i) => partText(part, `${where}[${i}]`) ?? []);
}

/** The messages as vLLM hands them to a chat template of this content format. */
export function conversationMessages(messages: readonly Message[], format: ContentFormat): Message[] {
  return messages.map((message, i) => {
    const texts = contentTexts(message.content, `messages[${i}].content`);
    const content =
      format === 'string' || message.role === 'tool' ? texts.join('\n') : texts.map((text) => ({ type: 'text', text }));
    return { ...message, content };
  });
}
