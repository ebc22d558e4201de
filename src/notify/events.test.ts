import { describe, expect, it } from 'vitest';
import { validateConfig } from '../config/load.js';

describe('notifications config', () => {
  it('defaults to no webhook, and a webhook to every event', () => {
    expect(validateConfig({}, 'test').notifications).toEqual({});
    expect(
      validateConfig({ notifications: { webhook: { url: 'https://hooks.example.com/rein' } } }, 'test').notifications
        .webhook,
    ).toEqual({
      url: 'https://hooks.example.com/rein',
      events: ['promotion', 'refusal', 'rollback', 'run_failed'],
      headersFromEnv: {},
      timeoutMs: 10_000,
    });
  });

  it('refuses a URL that is not http(s) and an event Rein does not send, naming each setting', () => {
    expect(() =>
      validateConfig({ notifications: { webhook: { url: 'ftp://hooks.example.com', events: ['deploy'] } } }, 'test'),
    ).toThrow(/notifications\.webhook\.url[\s\S]*notifications\.webhook\.events\.0[\s\S]*promotion/);
  });
});
