import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, describe, expect, it } from 'vitest';
import { createActivities, type ActivityDeps } from './index.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-activities-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A floor larger than any disk stands in for a full one.
const fullDisk = { dataDir: dir, minFreeBytes: Number.MAX_SAFE_INTEGER } as ActivityDeps;

describe('createActivities on a disk below storage.minFreeMegabytes', () => {
  it('refuses every stage before it starts, with a retryable DiskSpaceError that says what to do', async () => {
    const activities = createActivities(fullDisk) as unknown as Record<string, (input?: unknown) => Promise<unknown>>;
    // Preflight reports the low space; a notification writes nothing to disk and must still go out.
    const stages = Object.keys(activities).filter((name) => name !== 'checkWorkerHost' && name !== 'notify');
    expect(stages).toEqual(expect.arrayContaining(['runRollouts', 'buildBatch', 'updatePolicy', 'registerBasePolicy']));
    for (const name of stages) {
      const failure = await (activities[name] as (input?: unknown) => Promise<unknown>)({}).catch((e: unknown) => e);
      expect(failure, name).toBeInstanceOf(ApplicationFailure);
      expect(failure, name).toMatchObject({
        type: 'DiskSpaceError',
        nonRetryable: false,
        message: expect.stringMatching(
          new RegExp(
            `^only .* free under ${dir}, below the floor of 8\\.0 PiB: free space there, or lower storage\\.minFreeMegabytes`,
          ),
        ),
      });
    }
  });

  it('lets preflight run, and it reports the low space as a failed check', async () => {
    const report = await createActivities(fullDisk).checkWorkerHost();
    expect(report.checks.find((c) => c.name === 'free disk space')).toMatchObject({
      ok: false,
      detail: expect.stringContaining('lower storage.minFreeMegabytes'),
    });
  });

  it('runs the stage itself when there is room (or the floor is 0)', async () => {
    const { registerBasePolicy } = createActivities({ dataDir: dir, minFreeBytes: 0 } as ActivityDeps);
    // No registry in these deps: the activity's own refusal shows it ran.
    await expect(registerBasePolicy({ version: 'v0', checkpointUri: dir })).rejects.toMatchObject({
      type: 'PolicyUpdateError',
    });
  });
});
