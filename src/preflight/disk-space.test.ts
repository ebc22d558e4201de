import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { assertFreeSpace, DiskSpaceError, freeBytes } from './disk-space.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-disk-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('assertFreeSpace', () => {
  it('passes above the floor and says how much is free', async () => {
    const free = await assertFreeSpace(dir, 1);
    expect(free).toBeGreaterThan(0);
  });

  it('refuses below the floor, naming the directory, what is free, the floor and the fix', async () => {
    // A floor larger than any disk: no need to fill one.
    const floor = Number.MAX_SAFE_INTEGER;
    const err = await assertFreeSpace(dir, floor).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DiskSpaceError);
    const { message, directory, freeBytes: free, floorBytes } = err as DiskSpaceError;
    expect({ directory, floorBytes }).toEqual({ directory: dir, floorBytes: floor });
    expect(free).toBeGreaterThan(0);
    expect(message).toMatch(
      new RegExp(
        `^only \\d+\\.\\d (B|KiB|MiB|GiB|TiB) free under ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, below the floor of 8\\.0 PiB: `,
      ),
    );
    expect(message).toContain(
      'free space there, or lower storage.minFreeMegabytes in the config (0 turns the check off)',
    );
  });

  it('checks nothing with a floor of 0', async () => {
    await expect(assertFreeSpace(path.join(dir, 'nowhere'), 0)).resolves.toBeUndefined();
  });

  it('measures a data directory not created yet at its nearest existing parent', async () => {
    const notYet = await freeBytes(path.join(dir, 'not', 'made', 'yet'));
    // The same file system; others may write to it meanwhile.
    expect(Math.abs(notYet - (await freeBytes(dir)))).toBeLessThan(256 * 1024 * 1024);
  });
});
