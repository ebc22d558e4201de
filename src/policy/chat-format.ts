/**
 * The embedded policy's text format, packaged as a Hugging Face tokenizer: a byte-level
 * vocabulary (id = byte value, so any text encodes) plus a few special tokens, and a compact chat
 * template a small model can learn. Tool calls are written `<tool_call>NAME{json args}</tool_call>`,
 * and the template renders a call back from the OpenAI message exactly as it was generated, so
 * the next turn's prompt extends the previous one token for token.
 */
export const SPECIAL_TOKENS = [
  '<|endoftext|>',
  '<|system|>',
  '<|user|>',
  '<|assistant|>',
  '<|tool|>',
  '<|end|>',
  '<tool_call>',
  '</tool_call>',
] as const;

/** Ends every turn; generation stops on it. */
export const END_OF_TURN = '<|end|>';

export const CHAT_TEMPLATE = [
  '{%- for message in messages -%}',
  "{%- if message.role == 'assistant' -%}",
  "{{- '<|assistant|>' + (message.content or '') -}}",
  '{%- for call in (message.tool_calls or []) -%}',
  "{{- '<tool_call>' + call.function.name + call.function.arguments + '</tool_call>' -}}",
  '{%- endfor -%}',
  "{{- '<|end|>' -}}",
  '{%- else -%}',
  "{{- '<|' + message.role + '|>' + (message.content or '') + '<|end|>' -}}",
  '{%- endif -%}',
  '{%- endfor -%}',
  "{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- endif -%}",
].join('');

/** GPT-2's byte ↔ printable-character table, as the ByteLevel pre-tokenizer and decoder expect. */
function byteLevelAlphabet(): string[] {
  const printable = new Set<number>();
  for (let b = 33; b <= 126; b++) printable.add(b);
  for (let b = 161; b <= 172; b++) printable.add(b);
  for (let b = 174; b <= 255; b++) printable.add(b);
  let shifted = 0;
  return Array.from({ length: 256 }, (_, b) => String.fromCharCode(printable.has(b) ? b : 256 + shifted++));
}

export const VOCAB_SIZE = 256 + SPECIAL_TOKENS.length;

export function specialTokenId(token: (typeof SPECIAL_TOKENS)[number]): number {
  return 256 + SPECIAL_TOKENS.indexOf(token);
}

/** tokenizer.json: byte-level BPE without merges, so token id = byte value. */
export function tokenizerJson(): object {
  const vocab: Record<string, number> = {};
  byteLevelAlphabet().forEach((char, id) => (vocab[char] = id));
  SPECIAL_TOKENS.forEach((token, i) => (vocab[token] = 256 + i));
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIAL_TOKENS.map((content, i) => ({
      id: 256 + i,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: null,
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: [],
    },
  };
}

export function tokenizerConfig(): object {
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: null,
    eos_token: END_OF_TURN,
    pad_token: '<|endoftext|>',
    model_max_length: 512,
    chat_template: CHAT_TEMPLATE,
    added_tokens_decoder: Object.fromEntries(
      SPECIAL_TOKENS.map((content, i) => [
        String(256 + i),
        { content, special: true, normalized: false, lstrip: false, rstrip: false, single_word: false },
      ]),
    ),
  };
}

export interface ParsedReply {
  content: string | null;
  toolCalls: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
}

const CALL_HEAD = /<tool_call>([A-Za-z_][\w.-]*)(?=\{)/g;
const CALL_TAIL = '}</tool_call>';

/**
 * The end of a call's JSON-object arguments starting at `from`: the first `}</tool_call>` up to
 * which the text parses as an object (a string argument may itself hold `}</tool_call>`), or -1.
 */
function argumentsEnd(text: string, from: number): number {
  for (let end = text.indexOf(CALL_TAIL, from); end >= 0; end = text.indexOf(CALL_TAIL, end + 1)) {
    try {
      const parsed: unknown = JSON.parse(text.slice(from, end + 1));
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return end + 1;
    } catch {
      // not this one: the object goes on past it
    }
  }
  return -1;
}

/**
 * Splits generated text into content and OpenAI tool calls. A call whose arguments are not a JSON
 * object stays in the content, as vLLM's tool parsers leave malformed calls.
 */
export function parseToolCalls(text: string, callIdPrefix = 'call'): ParsedReply {
  const toolCalls: ParsedReply['toolCalls'] = [];
  let content = '';
  let copied = 0;
  for (const head of text.matchAll(CALL_HEAD)) {
    const from = head.index + head[0].length;
    if (head.index < copied) continue; // inside a call already taken
    const end = argumentsEnd(text, from);
    if (end < 0) continue;
    content += text.slice(copied, head.index);
    copied = end + CALL_TAIL.length - 1;
    toolCalls.push({
      id: `${callIdPrefix}_${toolCalls.length}`,
      type: 'function',
      function: { name: head[1] as string, arguments: text.slice(from, end) },
    });
  }
  content += text.slice(copied);
  return { content: content === '' && toolCalls.length > 0 ? null : content, toolCalls };
}
