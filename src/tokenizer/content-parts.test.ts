import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { QWEN3_DIR } from '../../test/helpers/qwen3.js';
import { CHAT_TEMPLATE } from '../policy/chat-format.js';
import { ContentPartError, conversationMessages, detectContentFormat } from './content-parts.js';

const text = (t: string) => ({ type: 'text', text: t });

describe('conversationMessages, vLLM’s rule for content parts', () => {
  it('joins text parts with one newline for string-content templates, skipping empty ones', () => {
    const [user, assistant, tool] = conversationMessages(
      [
        { role: 'user', content: [text('first'), text(''), 'bare', { type: 'input_text', text: 'last' }] },
        { role: 'assistant', content: null, tool_calls: [] },
        { role: 'tool', tool_call_id: 'c', content: [{ type: 'refusal', refusal: 'no' }, { type: 'text' }] },
      ],
      'string',
    );
    expect(user).toEqual({ role: 'user', content: 'first\nbare\nlast' });
    // vLLM: a null content is an empty part list, so the template sees "".
    expect(assistant).toEqual({ role: 'assistant', content: '', tool_calls: [] });
    expect(tool?.content).toBe('no');
  });

  it('keeps text dicts for templates that loop over the content, tool results joined', () => {
    const [user, tool] = conversationMessages(
      [
        { role: 'user', content: 'hi' },
        { role: 'tool', content: [text('a'), text('b')] },
      ],
      'openai',
    );
    expect(user?.content).toEqual([text('hi')]);
    expect(tool?.content).toBe('a\nb');
  });

  it('refuses an image part, naming its type, where it is and the fix', () => {
    const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } };
    const refuse = () => conversationMessages([{ role: 'user', content: [text('look'), image] }], 'string');
    expect(refuse).toThrow(ContentPartError);
    expect(refuse).toThrow(/messages\[0\]\.content\[1\]: content part type 'image_url' is not supported/);
    expect(refuse).toThrow(/send the message content as a string or as text parts/);
    for (const part of [{ type: 'input_audio', input_audio: {} }, { type: 'file', file: {} }, { image_url: 'x' }])
      expect(() => conversationMessages([{ role: 'user', content: [part] }], 'string')).toThrow(ContentPartError);
  });
});

describe('detectContentFormat, vLLM’s _detect_content_format', () => {
  it('finds string templates (the embedded one, Qwen3) and templates looping over content', () => {
    expect(detectContentFormat(CHAT_TEMPLATE)).toBe('string');
    const qwen3Config = JSON.parse(readFileSync(path.join(QWEN3_DIR, 'tokenizer_config.json'), 'utf8')) as {
      chat_template: string;
    };
    expect(detectContentFormat(qwen3Config.chat_template)).toBe('string');
    expect(
      detectContentFormat(
        "{% set loop_messages = messages %}{% for m in loop_messages %}{% for c in m['content'] %}{{ c.text }}" +
          '{% endfor %}{% endfor %}',
      ),
    ).toBe('openai');
    expect(
      detectContentFormat('{% for message in messages %}{% for p in message.content %}{% endfor %}{% endfor %}'),
    ).toBe('openai');
  });
});
