import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';

// Rein's data (prompts and completions, rollout keys, what was trained and released) is for the
// user who runs it: what Rein creates is 0700 / 0600 whatever the umask, also when used as a library.
// Folders and files that already exist keep their modes: they may be shared on purpose.

/** Creates a folder (and any missing parents) readable by its owner only. */
export function makePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/**
 * Creates an SQLite database's file (and folder) before SQLite does, readable by its owner only;
 * SQLite gives the -wal and -shm files beside it the database file's mode.
 */
export function makePrivateDatabaseFile(file: string): void {
  makePrivateDir(path.dirname(file));
  closeSync(openSync(file, 'a', 0o600));
}
