import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkNodeVersion, checkWorkerHost } from './preflight.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-host-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('checkWorkerHost', () => {
  it('creates the data directory and leaves nothing behind', async () => {
    const dataDir = path.join(dir, 'fresh', 'data');
    const report = await checkWorkerHost({ dataDir });
    expect(report.checks.every((c) => c.ok)).toBe(true);
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it('fails the disk check below the floor, naming the directory, the floor and the fix', async () => {
    const report = await checkWorkerHost({ dataDir: dir, minFreeBytes: Number.MAX_SAFE_INTEGER });
    const disk = report.checks.find((c) => c.name === 'free disk space');
    expect(disk).toMatchObject({
      ok: false,
      detail: expect.stringMatching(
        new RegExp(
          `free under ${dir}, below the floor of 8\\.0 PiB: free space there, or lower storage\\.minFreeMegabytes`,
        ),
      ),
    });
    expect(report.checks.filter((c) => !c.ok)).toHaveLength(1);
  });

  it('skips the disk check with a floor of 0', async () => {
    const report = await checkWorkerHost({ dataDir: dir, minFreeBytes: 0 });
    expect(report.checks.find((c) => c.name === 'free disk space')).toMatchObject({
      ok: true,
      detail: 'not checked (storage.minFreeMegabytes is 0)',
    });
  });
});

describe('checkNodeVersion', () => {
  it.each([
    ['20.19.0', true],
    ['20.20.2', true],
    ['22.1.0', true],
    ['20.18.3', false],
    ['18.20.0', false],
  ])('Node %s → ok=%s', (version, ok) => {
    expect(checkNodeVersion(version).ok).toBe(ok);
  });
});
