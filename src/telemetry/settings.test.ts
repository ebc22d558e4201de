import { describe, expect, it } from 'vitest';
import { validateConfig } from '../config/load.js';
import { tracingOptions } from './settings.js';
import { configProblems as problems } from '../../test/helpers/config-problems.js';

describe('gateway.tracing', () => {
  it('is off by default', () => {
    const config = validateConfig({}, 'test');
    expect(config.gateway.tracing).toMatchObject({
      enabled: false,
      content: false,
      endpoint: 'http://127.0.0.1:4318/v1/traces',
    });
    expect(tracingOptions(config.gateway.tracing)).toBeUndefined();
  });

  it('wants the traces URL with its path, and says what it looks like', () => {
    const [problem] = problems(() =>
      validateConfig({ gateway: { tracing: { enabled: true, endpoint: 'http://localhost:4318' } } }, 'test'),
    );
    expect(problem).toMatch(
      /^gateway\.tracing\.endpoint: .*usually ending in \/v1\/traces.*http:\/\/localhost:4318\/v1\/traces/,
    );
  });

  it('reads secret header values from the environment and names a variable that is not set', () => {
    const { tracing } = validateConfig(
      {
        gateway: {
          tracing: {
            enabled: true,
            endpoint: 'https://langfuse.example/api/public/otel/v1/traces',
            headers: { 'x-team': 'rl' },
            headersEnv: { authorization: 'LANGFUSE_AUTH' },
          },
        },
      },
      'test',
    ).gateway;
    expect(tracingOptions(tracing, { LANGFUSE_AUTH: 'Basic cGs6c2s=' })).toMatchObject({
      endpoint: 'https://langfuse.example/api/public/otel/v1/traces',
      headers: { 'x-team': 'rl', authorization: 'Basic cGs6c2s=' },
    });
    expect(() => tracingOptions(tracing, {})).toThrow(
      'gateway.tracing.headersEnv.authorization names LANGFUSE_AUTH, which is not set in the environment',
    );
  });
});
