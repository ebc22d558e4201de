import { lstat, readdir, rm } from 'node:fs/promises';
import path from 'node:path';

/** A file or folder on disk: its size in all, and when anything in it was last written. */
export interface DiskEntry {
  path: string;
  directory: boolean;
  bytes: number;
  lastWrite: number;
}

const isMissing = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

/** Size and newest modification time of a file or a folder (everything under it; links are not followed). */
export async function measure(file: string): Promise<DiskEntry | undefined> {
  let stats;
  try {
    stats = await lstat(file);
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  const entry = {
    path: file,
    directory: stats.isDirectory(),
    bytes: stats.isDirectory() ? 0 : stats.size,
    lastWrite: stats.mtimeMs,
  };
  if (!stats.isDirectory()) return entry;
  for (const name of await readdir(file).catch((err: unknown) => (isMissing(err) ? [] : Promise.reject(err)))) {
    const inner = await measure(path.join(file, name));
    if (!inner) continue;
    entry.bytes += inner.bytes;
    entry.lastWrite = Math.max(entry.lastWrite, inner.lastWrite);
  }
  return entry;
}

/** The entries of a folder, measured; none when it does not exist. */
export async function entriesOf(dir: string): Promise<DiskEntry[]> {
  const names = await readdir(dir).catch((err: unknown) => (isMissing(err) ? [] : Promise.reject(err)));
  const entries: DiskEntry[] = [];
  for (const name of names.sort()) {
    const entry = await measure(path.join(dir, name));
    if (entry) entries.push(entry);
  }
  return entries;
}

/**
 * A temporary file or folder of an atomic write (`<name>.<uuid>.tmp`, see the artifact stores): its writer died if it
 * is old.
 */
const TEMPORARY = /\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp$/;

/** Temporaries anywhere under `dir`, measured (not looked into further: a temporary folder counts whole). */
export async function temporariesUnder(dir: string): Promise<DiskEntry[]> {
  const found: DiskEntry[] = [];
  const walk = async (at: string): Promise<void> => {
    const entries = await readdir(at, { withFileTypes: true }).catch((err: unknown) =>
      isMissing(err) ? [] : Promise.reject(err),
    );
    for (const entry of entries) {
      const file = path.join(at, entry.name);
      if (TEMPORARY.test(entry.name)) {
        const measured = await measure(file);
        if (measured) found.push(measured);
      } else if (entry.isDirectory()) {
        await walk(file);
      }
    }
  };
  await walk(dir);
  return found;
}

export async function remove(entry: DiskEntry): Promise<void> {
  await rm(entry.path, { recursive: true, force: true });
}
