import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readSync } from 'node:fs';

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
 * Reading every process's environment is the costly part (~4 ms of CPU a pass with 220 processes
 * on the machine, four times a spawn's), so runs that end together share one sweep: a token asked
 * for while a sweep reads /proc waits for the next one (a process forked during the current pass
 * could be missed by it), and a sweep starts only when the last one's time is at most a tenth of
 * the time since it started: a burst of runs ending shares one pass, however many processes the
 * machine has, and sweeping takes at most ~10% of a core. A run that ends alone is swept at once.
 */
export function killMarked(token: string): Promise<void> {
  return sweeps.sweep(token);
}

/** A sweep's time over the time from its start to the next one's, at most (see killMarked). */
const SWEEP_SHARE = 0.1;

class SharedSweeps {
  private waiting = new Map<string, Array<() => void>>();
  private running = false;
  private lastStart = -Infinity;
  private lastMs = 0;
  private timer: NodeJS.Timeout | null = null;

  sweep(token: string): Promise<void> {
    if (process.platform !== 'linux') return Promise.resolve();
    return new Promise((resolve) => {
      this.waiting.set(token, [...(this.waiting.get(token) ?? []), resolve]);
      this.next();
    });
  }

  private next(): void {
    if (this.running || this.timer || this.waiting.size === 0) return;
    const wait = this.lastStart + this.lastMs / SWEEP_SHARE - performance.now();
    if (wait > 0) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.next();
      }, wait);
      return;
    }
    this.running = true;
    this.lastStart = performance.now();
    const tokens = this.waiting;
    this.waiting = new Map();
    void killMarkedBy([...tokens.keys()]).finally(() => {
      this.running = false;
      this.lastMs = performance.now() - this.lastStart;
      for (const resolvers of tokens.values()) for (const resolve of resolvers) resolve();
      this.next();
    });
  }
}

const sweeps = new SharedSweeps();

/**
 * Several passes over /proc, for processes forked while the previous pass was reading. A pass
 * reads synchronously into one reused buffer: through the thread pool, with a buffer per file,
 * the same pass cost ~4× the CPU. It takes a few milliseconds; between passes the event loop runs.
 */
async function killMarkedBy(tokens: string[]): Promise<void> {
  const markers = tokens.map((token) => Buffer.from(`${RUN_TOKEN_VAR}=${token}\0`));
  for (let pass = 0; pass < 5; pass++) {
    if (pass > 0) await new Promise((resolve) => setImmediate(resolve));
    const found = markedPids(markers);
    if (found === null || found.length === 0) return;
    for (const pid of found) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
}

let environ = Buffer.alloc(64 * 1024);

/** The processes whose environment holds one of the markers; null when /proc cannot be read. */
function markedPids(markers: Buffer[]): number[] | null {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  const found: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const length = readEnviron(entry);
    if (length === 0) continue;
    const text = environ.subarray(0, length);
    if (markers.some((marker) => text.includes(marker))) found.push(Number(entry));
  }
  return found;
}

/** Reads /proc/<pid>/environ into `environ` (grown as needed); 0 when it is gone or another user's. */
function readEnviron(pid: string): number {
  let fd: number;
  try {
    fd = openSync(`/proc/${pid}/environ`, 'r');
  } catch {
    return 0;
  }
  try {
    let length = 0;
    for (;;) {
      if (length === environ.length) environ = Buffer.concat([environ, Buffer.alloc(environ.length)]);
      const read = readSync(fd, environ, length, environ.length - length, null);
      if (read === 0) return length;
      length += read;
    }
  } catch {
    return 0;
  } finally {
    closeSync(fd);
  }
}
