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

  it('fails the disk check below the minimum, saying how much is needed', async () => {
    const report = await checkWorkerHost({ dataDir: dir, minFreeBytes: Number.MAX_SAFE_INTEGER });
    const disk = report.checks.find((c) => c.name === 'free disk space');
    expect(disk).toMatchObject({ ok: false, detail: expect.stringContaining('; need at least') });
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
