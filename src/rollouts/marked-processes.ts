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
 * where /proc is unreadable, only the process group is killed.
 *
 * Reading every process's environment is the costly part (a quarter of a worker's CPU per rollout
 * at 30 runs at once), so runs that end together share one sweep: a token asked for while a sweep
 * reads /proc waits for the next one (a process forked during the current pass could be missed by
 * it), which looks for every token waiting.
 */
export function killMarked(token: string): Promise<void> {
  return sweeps.sweep(token);
}

class SharedSweeps {
  private waiting = new Map<string, Array<() => void>>();
  private running = false;

  sweep(token: string): Promise<void> {
    if (process.platform !== 'linux') return Promise.resolve();
    return new Promise((resolve) => {
      this.waiting.set(token, [...(this.waiting.get(token) ?? []), resolve]);
      this.next();
    });
  }

  private next(): void {
    if (this.running || this.waiting.size === 0) return;
    this.running = true;
    const tokens = this.waiting;
    this.waiting = new Map();
    void killMarkedBy([...tokens.keys()]).finally(() => {
      this.running = false;
      for (const resolvers of tokens.values()) for (const resolve of resolvers) resolve();
      this.next();
    });
  }
}

const sweeps = new SharedSweeps();

/** Several passes over /proc, for processes forked while the previous pass was reading. */
async function killMarkedBy(tokens: string[]): Promise<void> {
  const markers = tokens.map((token) => Buffer.from(`${RUN_TOKEN_VAR}=${token}\0`));
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
          const environ = await readFile(`/proc/${pid}/environ`);
          return markers.some((marker) => environ.includes(marker)) ? pid : null;
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
