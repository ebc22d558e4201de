import { statfs } from 'node:fs/promises';
import path from 'node:path';

/** The default of `storage.minFreeMegabytes`: below this, preflight fails and activities wait. */
export const DEFAULT_MIN_FREE_MEGABYTES = 1024;

const MEGABYTE = 1024 * 1024;

export const megabytes = (n: number) => n * MEGABYTE;

/** Free space under a directory has fallen below the configured floor. */
export class DiskSpaceError extends Error {
  constructor(
    readonly directory: string,
    readonly freeBytes: number,
    readonly floorBytes: number,
  ) {
    super(
      `only ${formatBytes(freeBytes)} free under ${directory}, below the floor of ${formatBytes(floorBytes)}: ` +
        'free space there, or lower storage.minFreeMegabytes in the config (0 turns the check off)',
    );
    this.name = 'DiskSpaceError';
  }
}

/**
 * Bytes available to this user on the file system that holds `directory`. A directory not made
 * yet (a fresh dataDir) is measured at its nearest existing parent, where it will be created.
 */
export async function freeBytes(directory: string): Promise<number> {
  let dir = path.resolve(directory);
  for (;;) {
    try {
      const stats = await statfs(dir);
      return stats.bavail * stats.bsize;
    } catch (err) {
      const parent = path.dirname(dir);
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || parent === dir) throw err;
      dir = parent;
    }
  }
}

/** Throws a DiskSpaceError when less than `floorBytes` is free under `directory`; a floor of 0 checks nothing. */
export async function assertFreeSpace(directory: string, floorBytes: number): Promise<number | undefined> {
  if (floorBytes <= 0) return undefined;
  const free = await freeBytes(directory);
  if (free < floorBytes) throw new DiskSpaceError(directory, free, floorBytes);
  return free;
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}
