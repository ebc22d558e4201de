import { describe, expect, it } from 'vitest';
import { promptIdsSent, withPromptIds } from './sent-ids.js';

describe('the prompt ids a token-in chat request carries', () => {
  const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

  it('go in prompt_token_ids, or in kv_transfer_params beside what the harness put there (vLLM #48145)', () => {
    expect(withPromptIds(chat, [1, 2], 'prompt_token_ids')).toEqual({ ...chat, prompt_token_ids: [1, 2] });
    const asked = { ...chat, kv_transfer_params: { do_remote_prefill: false } };
    expect(withPromptIds(asked, [1, 2], 'kv_transfer_params')).toEqual({
      ...chat,
      kv_transfer_params: { do_remote_prefill: false, prompt_token_ids: [1, 2] },
    });
    // The harness's own object is not changed.
    expect(asked.kv_transfer_params).toEqual({ do_remote_prefill: false });
  });

  it('are read back from either field, and only when they are ids', () => {
    expect(promptIdsSent(withPromptIds(chat, [3], 'prompt_token_ids'))).toEqual([3]);
    expect(promptIdsSent(withPromptIds(chat, [3], 'kv_transfer_params'))).toEqual([3]);
    expect(promptIdsSent(chat)).toBeUndefined();
    expect(promptIdsSent({ ...chat, prompt_token_ids: ['a'] })).toBeUndefined();
    expect(promptIdsSent(null)).toBeUndefined();
  });
});
