import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalArtifactStore } from '../src/artifacts/local-store.js';
import { validateConfig } from '../src/config/load.js';
import { SqliteTraceStore } from '../src/store/sqlite-store.js';
import { fixedRunDeps } from './run-deps.js';
import { createBatchActivities } from './build-batch.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-batch-activity-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('buildBatch activity', () => {
  it('turns untrustworthy evidence into a non-retryable failure that names the report', async () => {
    const store = new SqliteTraceStore(path.join(dir, 'traces.sqlite'));
    await store.createRollout({ id: 'r1', taskId: 't' });
    const { buildBatch } = createBatchActivities({
      store,
      artifacts: new LocalArtifactStore(path.join(dir, 'artifacts')),
      runs: fixedRunDeps(validateConfig({}, 'test')),
    });
    const failure = await buildBatch({ iteration: 1, policyVersion: 'v1', configHash: 'c', rolloutIds: ['r1'] }).catch(
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({
      nonRetryable: true,
      type: 'DataQualityError',
      message: expect.stringContaining('0 usable rollouts, fewer than samples.thresholds.minRolloutsUsed 1'),
      details: [
        {
          problems: [expect.any(String), expect.stringContaining('only 0 of 1 rollouts were scored')],
          reportUri: expect.stringMatching(/^file:.*batch-report\.json$/),
        },
      ],
    });
    await store.close();
  });
});
