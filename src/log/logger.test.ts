import { PassThrough } from 'node:stream';
import { ActivityFailure, ApplicationFailure, RetryState } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { temporalLogger } from '../../workers/runtime.js';
import { createLogger, type Logger } from './logger.js';

function capture(): { logger: Logger; lines: () => Array<Record<string, unknown>> } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return {
    logger: createLogger('info', 'test', stream),
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

// What the worker logs when an activity fails: a generic ActivityFailure around the reason.
const activityFailure = () =>
  new ActivityFailure(
    'Activity task failed',
    'updatePolicy',
    '7',
    RetryState.IN_PROGRESS,
    undefined,
    ApplicationFailure.create({
      message: 'only 12.0 MiB free under /data, below the floor of 1.0 GiB',
      type: 'DiskSpaceError',
      cause: Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }),
    }),
  );

describe('createLogger', () => {
  it('writes an Error under any key with its message, type, short stack and causes, not as {}', () => {
    const { logger, lines } = capture();
    logger.warn({ error: activityFailure(), attempt: 2 }, 'Activity failed');
    const [line] = lines();
    expect(line).toMatchObject({
      msg: 'Activity failed',
      attempt: 2,
      error: {
        name: 'ActivityFailure',
        message: 'Activity task failed',
        stack: expect.stringContaining('ActivityFailure: Activity task failed'),
        causes: [
          'ApplicationFailure (DiskSpaceError): only 12.0 MiB free under /data, below the floor of 1.0 GiB',
          'Error (ENOSPC): ENOSPC: no space left on device, write',
        ],
      },
    });
    expect((line?.error as { stack: string }).stack.split('\n').length).toBeLessThanOrEqual(6);
  });

  it('writes an ApplicationFailure with its failure type, and `err` the same way', () => {
    const { logger, lines } = capture();
    logger.error({ err: ApplicationFailure.retryable('disk full', 'DiskSpaceError') }, 'stage refused');
    logger.error(new Error('outer', { cause: new Error('inner') }));
    expect(lines()).toMatchObject([
      { err: { name: 'ApplicationFailure', type: 'DiskSpaceError', message: 'disk full' } },
      { msg: 'outer', err: { name: 'Error', message: 'outer', causes: ['Error: inner'] } },
    ]);
  });
});

describe('the Temporal SDK logger bridge', () => {
  it("logs the SDK's `error` metadata with its message and cause", () => {
    const { logger, lines } = capture();
    temporalLogger(logger).warn('Activity failed', { error: activityFailure(), durationMs: 12 });
    const [line] = lines();
    expect(line).toMatchObject({
      component: 'temporal-sdk',
      msg: 'Activity failed',
      durationMs: 12,
      error: { message: 'Activity task failed' },
    });
    expect((line?.error as { causes: string[] }).causes[0]).toContain('DiskSpaceError');
  });
});
