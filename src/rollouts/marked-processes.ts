import type { ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';

/** Marks every process of one command run, its descendants included (see `killMarked`). */
export const RUN_TOKEN_VAR = 'REIN_RUN_TOKEN';

/** Sends a signal to the process group a detached child leads. */
export function killProcessGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid !== undefined) process.kill(-child.pid, signal);
  } catch {
    // The group has already gone.
  }
}

/**
 * Kills every process that carries this run's token in its environment. A process group does not
 * hold a harness's descendants: one that calls setsid (a daemon, `nohup … &` in a new session)
 * leaves it and would outlive the run, holding its pipes and its resources. Node cannot make the
 * runner a subreaper or move the run into a cgroup without root, but the environment is inherited
 * by every descendant and survives setsid, so /proc finds them all. Linux only; elsewhere, or
 * where /proc is unreadable, only the process group is killed. Several passes, for processes
 * forked while the previous pass was reading.
 */
export async function killMarked(token: string): Promise<void> {
  if (process.platform !== 'linux') return;
  const marker = Buffer.from(`${RUN_TOKEN_VAR}=${token}\0`);
  for (let pass = 0; pass < 5; pass++) {
    let entries: string[];
    try {
      entries = await readdir('/proc');
    } catch {
      return;
    }
    const pids = entries
      .filter((e) => /^\d+$/.test(e))
      .map(Number)
      .filter((pid) => pid !== process.pid);
    const marked = await Promise.all(
      pids.map(async (pid) => {
        try {
          return (await readFile(`/proc/${pid}/environ`)).includes(marker) ? pid : null;
        } catch {
          return null; // gone, or another user's
        }
      }),
    );
    const found = marked.filter((pid): pid is number => pid !== null);
    if (found.length === 0) return;
    for (const pid of found) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
}
