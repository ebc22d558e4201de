import { mkdirSync } from 'node:fs';

// Rein's data (prompts and completions, rollout keys, what was trained and released) is for the
// user who runs it: what Rein creates is 0700 / 0600 whatever the umask, also when used as a library.
// Folders and files that already exist keep their modes: they may be shared on purpose.

/** Creates a folder (and any missing parents) readable by its owner only. */
export function makePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}
