import { describe, expect, it } from 'vitest';
import { DEFAULT_REDACTION_RULES } from './redact.js';
import { withoutSecretIds } from './secret-ids.js';

const secret = 'sk-abcdefghijklmnopqrstuv';
const tokens = (n: number) => ({ completionIds: [n], logprobs: [-0.5], finishReason: 'stop' });

describe('withoutSecretIds', () => {
  it('withholds the ids of exactly the choices whose text was redacted, matched by their index', () => {
    // Choices arrive out of order; their tokens are in index order.
    const response = {
      choices: [
        { index: 1, message: { content: `key ${secret}` } },
        { index: 0, message: { content: 'fine' } },
      ],
    };
    const out = withoutSecretIds(
      { response, promptIds: [1, 2], choices: [tokens(0), tokens(1)] },
      false,
      DEFAULT_REDACTION_RULES,
    );
    expect(out.promptIds).toEqual([1, 2]);
    expect(out.choices).toEqual([tokens(0), { completionIds: null, logprobs: null, finishReason: 'stop' }]);
    expect(JSON.stringify(out.response)).not.toContain(secret);
  });

  it('withholds the prompt ids when the request had something redacted, and every choice when the response changed outside its choices', () => {
    const response = { choices: [{ index: 0, text: 'fine' }], system_fingerprint: secret };
    const out = withoutSecretIds({ response, promptIds: [1, 2], choices: [tokens(0)] }, true, DEFAULT_REDACTION_RULES);
    expect(out).toMatchObject({ promptIds: null, choices: [{ completionIds: null, logprobs: null }] });
  });

  it('keeps everything as it is when nothing was redacted', () => {
    const result = {
      response: { choices: [{ index: 0, text: 'fine' }] },
      promptIds: [1],
      choices: [tokens(0)],
      upstreamStatus: 200,
    };
    expect(withoutSecretIds(result, false, DEFAULT_REDACTION_RULES)).toEqual(result);
  });

  it('keeps no per-token text of a redacted reply: its log-probs (token strings and bytes, which spell the secret piece by piece) are dropped', () => {
    const pieces = ['key ', 'sk', '-abcdefgh', 'ijklmnopqrstuv'];
    const entry = (token: string) => ({
      token,
      bytes: [...Buffer.from(token)],
      logprob: -0.1,
      top_logprobs: [{ token, bytes: [...Buffer.from(token)], logprob: -0.1 }],
    });
    const chat = {
      choices: [{ index: 0, message: { content: pieces.join('') }, logprobs: { content: pieces.map(entry) } }],
    };
    const completion = {
      choices: [
        {
          index: 0,
          text: pieces.join(''),
          logprobs: {
            tokens: pieces,
            token_logprobs: pieces.map(() => -0.1),
            top_logprobs: pieces.map((t) => ({ [t]: -0.1 })),
            text_offset: [0, 4, 6, 15],
          },
        },
      ],
    };
    for (const response of [chat, completion]) {
      const out = withoutSecretIds({ response, promptIds: [1], choices: [tokens(0)] }, false, DEFAULT_REDACTION_RULES);
      const journaled = JSON.stringify(out.response);
      expect(journaled).not.toContain('abcdefgh');
      expect(journaled).not.toContain(JSON.stringify([...Buffer.from('-abcdefgh')]).slice(1, -1));
      expect(out.choices).toEqual([{ completionIds: null, logprobs: null, finishReason: 'stop' }]);
    }
  });

  it("drops the prompt's per-token log-probs (prompt_logprobs) when the request had something redacted", () => {
    const response = {
      choices: [{ index: 0, text: 'fine' }],
      prompt_logprobs: [null, { '9': { logprob: -1, decoded_token: '-abcdefgh' } }],
    };
    const out = withoutSecretIds({ response, promptIds: [1, 9], choices: [tokens(0)] }, true, DEFAULT_REDACTION_RULES);
    expect(JSON.stringify(out.response)).not.toContain('abcdefgh');
    expect(out.choices).toEqual([tokens(0)]);
  });
});
