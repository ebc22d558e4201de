import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { conversationMessages, detectContentFormat, type ContentFormat } from './content-parts.js';

/**
 * A model's own tokenizer and chat template, loaded from a Hugging Face model directory
 * (`tokenizer.json`, `tokenizer_config.json`). Used to re-render prompts when a backend returns
 * no token ids, and to measure how far re-rendering drifts from the engine's ids when it does.
 */
export interface ChatRequest {
  messages: Array<Record<string, unknown>>;
  tools?: unknown[];
  chat_template_kwargs?: Record<string, unknown>;
}

interface TokenizerConfig {
  chat_template?: string | Array<{ name: string; template: string }>;
  bos_token?: string | { content: string } | null;
  eos_token?: string | { content: string } | null;
  [key: string]: unknown;
}

export class ChatTokenizer {
  private readonly tokenizer: Tokenizer;
  private readonly template: Template;
  /** How message contents reach the template, detected from it as vLLM does (see content-parts.ts). */
  readonly contentFormat: ContentFormat;
  readonly eosToken: string | null;
  private readonly bosToken: string | null;

  constructor(
    tokenizerJson: object,
    private readonly config: TokenizerConfig,
  ) {
    this.tokenizer = new Tokenizer(tokenizerJson, config);
    const source = Array.isArray(config.chat_template)
      ? (config.chat_template.find((t) => t.name === 'default') ?? config.chat_template[0])?.template
      : config.chat_template;
    if (!source) throw new Error('tokenizer_config.json has no chat_template');
    this.template = new Template(source);
    this.contentFormat = detectContentFormat(source);
    this.eosToken = tokenText(config.eos_token);
    this.bosToken = tokenText(config.bos_token);
  }

  /** SHA-256 of the tokenizer.json bytes it was loaded from: batches record it, trainers check it. */
  fileSha256: string | undefined;

  static fromDirectory(dir: string): ChatTokenizer {
    const read = (name: string) => {
      const file = path.join(dir, name);
      try {
        const bytes = readFileSync(file);
        return { bytes, json: JSON.parse(bytes.toString('utf8')) as object };
      } catch (err) {
        throw new Error(`cannot load ${file}: ${(err as Error).message}`);
      }
    };
    const tokenizer = read('tokenizer.json');
    const loaded = new ChatTokenizer(tokenizer.json, read('tokenizer_config.json').json as TokenizerConfig);
    loaded.fileSha256 = createHash('sha256').update(tokenizer.bytes).digest('hex');
    return loaded;
  }

  encode(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: readonly number[]): string {
    // An empty reply (a model that ends its turn at once) is empty text; the library refuses [].
    if (ids.length === 0) return '';
    return this.tokenizer.decode([...ids], { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  /**
   * The template's text for a request. Content-part arrays are flattened or refused first, as vLLM
   * does (a part that is not text throws a ContentPartError).
   */
  render(request: ChatRequest, addGenerationPrompt: boolean): string {
    return this.template.render({
      ...request.chat_template_kwargs,
      messages: conversationMessages(request.messages, this.contentFormat),
      tools: request.tools,
      add_generation_prompt: addGenerationPrompt,
      bos_token: this.bosToken ?? '',
      eos_token: this.eosToken ?? '',
    });
  }

  /** The prompt ids an engine would have used for this request. */
  promptIds(request: ChatRequest): number[] {
    return this.encode(this.render(request, true));
  }

  /**
   * The ids of an assistant reply as the model would have generated them: the template's
   * rendering of the reply after the generation prompt, up to and including the end-of-turn token.
   */
  completionIds(request: ChatRequest, reply: Record<string, unknown>): number[] {
    const prompt = this.render(request, true);
    const full = this.render({ ...request, messages: [...request.messages, reply] }, false);
    if (!full.startsWith(prompt)) {
      throw new Error(
        'the chat template renders the reply in a way that changes the prompt; cannot isolate its tokens',
      );
    }
    let tail = full.slice(prompt.length);
    const end = this.eosToken ? tail.lastIndexOf(this.eosToken) : -1;
    if (end >= 0) tail = tail.slice(0, end + (this.eosToken as string).length);
    return this.encode(tail);
  }
}

function tokenText(token: TokenizerConfig['eos_token']): string | null {
  if (!token) return null;
  return typeof token === 'string' ? token : token.content;
}
