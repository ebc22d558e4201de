import { describe, expect, it } from 'vitest';
import { ConfigError, validateConfig } from './load.js';

describe('gateway.redact.rules', () => {
  it('are refused at load when RE2 cannot run them in linear time, naming the rule', () => {
    let error: unknown;
    try {
      validateConfig(
        {
          gateway: {
            redact: {
              rules: [
                { name: 'ok', regex: '(?i)ticket-\\d+' },
                { name: 'ahead', regex: 'key(?=\\d)' },
              ],
            },
          },
        },
        'test',
      );
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      expect.stringMatching(/^gateway\.redact\.rules\.1\.regex: .*linear time: no backreferences or lookaround/),
    ]);
  });
});
