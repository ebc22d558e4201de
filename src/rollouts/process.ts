import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createWriteStream, type WriteStream } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';

export interface CommandSpec {
  command: string;
  args: string[];
  cwd?: string | undefined;
  /**
   * The whole environment of the child: nothing is inherited that is not listed here, except
   * `REIN_RUN_TOKEN`, which marks the run's processes (see `killMarked`).
   */
  env: Record<string, string>;
  timeoutMs: number;
  stdin?: string;
  /** stdout and stderr are written here as they arrive (up to `logLimitBytes`). */
  logFile: string;
  /**
   * At most this many bytes of output reach the log file (default 8 MiB): the first half as it
   * arrives, the last half when the run ends, and one line between them saying how much was cut.
   */
  logLimitBytes?: number;
  signal?: AbortSignal | undefined;
}

export interface CommandResult {
  exitCode: number | null;
  killedBy: NodeJS.Signals | null;
  timedOut: boolean;
  cancelled: boolean;
  /** Set when the command could not be started at all (not found, not executable). */
  spawnError: string | null;
  /** stdout, up to 1 MiB. */
  stdout: string;
  /** The end of stderr, for failure evidence. */
  stderrTail: string;
  /** All the output (stdout and stderr) the command produced. */
  logBytes: number;
  /** How much of it the log file leaves out (0 when it holds everything). */
  logTruncatedBytes: number;
  seconds: number;
}

const STDOUT_LIMIT = 1024 * 1024;
const TAIL = 2000;
const LOG_LIMIT = 8 * 1024 * 1024;
/** Between SIGTERM and SIGKILL on timeout or cancellation. */
const GRACE_MS = 2000;
/** How long output is still read after the command exits, from descendants that hold its pipes. */
const DRAIN_MS = 1500;
export const RUN_TOKEN_VAR = 'REIN_RUN_TOKEN';

/**
 * Runs a command in its own process group and never rejects: every way it can end is in the
 * result. The run ends when the command's own process exits (its output is drained for a moment,
 * then no longer read), when it times out, or when it is cancelled; then everything it started is
 * killed, its tool subprocesses and any daemon that left the group included.
 */
export function runCommand(spec: CommandSpec): Promise<CommandResult> {
  const started = performance.now();
  const token = randomUUID();
  return new Promise((resolve) => {
    const log = new CappedLog(spec.logFile, spec.logLimitBytes ?? LOG_LIMIT);
    let stdout = '';
    let stderrTail = '';
    let timedOut = false;
    let cancelled = false;
    let spawnError: string | null = null;
    let exited: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let finished = false;
    const timers: NodeJS.Timeout[] = [];
    const child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: { ...spec.env, [RUN_TOKEN_VAR]: token },
      detached: true,
      stdio: [spec.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const killGroup = (signal: NodeJS.Signals) => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal);
      } catch {
        // The group has already gone.
      }
    };

    const finish = () => {
      if (finished) return;
      finished = true;
      for (const t of timers) clearTimeout(t);
      spec.signal?.removeEventListener('abort', onAbort);
      // A descendant may still hold the pipes; the run no longer waits for it.
      child.stdout?.destroy();
      child.stderr?.destroy();
      child.stdin?.destroy();
      killGroup('SIGKILL');
      void killMarked(token).then(() =>
        log.close(() =>
          resolve({
            exitCode: exited?.code ?? null,
            killedBy: exited?.signal ?? null,
            timedOut,
            cancelled,
            spawnError,
            stdout: stdout.slice(0, STDOUT_LIMIT),
            stderrTail,
            logBytes: log.bytes,
            logTruncatedBytes: log.truncatedBytes,
            seconds: (performance.now() - started) / 1000,
          }),
        ),
      );
    };
    const stop = () => {
      killGroup('SIGTERM');
      timers.push(setTimeout(() => killGroup('SIGKILL'), GRACE_MS));
      // Even a command that cannot be killed (stuck in the kernel) does not hold the run.
      timers.push(setTimeout(finish, GRACE_MS + DRAIN_MS + 1000));
    };
    timers.push(
      setTimeout(() => {
        timedOut = true;
        stop();
      }, spec.timeoutMs),
    );
    const onAbort = () => {
      cancelled = true;
      stop();
    };
    spec.signal?.addEventListener('abort', onAbort, { once: true });
    if (spec.signal?.aborted) onAbort();

    if (spec.stdin !== undefined) {
      child.stdin?.on('error', () => undefined); // a child that exits without reading its input
      child.stdin?.end(spec.stdin);
    }
    child.stdout?.on('data', (chunk: Buffer) => {
      log.write(chunk);
      if (stdout.length < STDOUT_LIMIT) stdout += chunk.toString('utf8');
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      log.write(chunk);
      stderrTail = (stderrTail + chunk.toString('utf8')).slice(-TAIL);
    });
    child.on('error', (err) => {
      spawnError = `${spec.command}: ${err.message}`;
    });
    child.on('exit', (code, signal) => {
      exited = { code, signal };
      timers.push(setTimeout(finish, DRAIN_MS));
    });
    // All pipes closed after the exit (or the command never started): nothing left to drain.
    child.on('close', finish);
  });
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
    const pids = entries.filter((e) => /^\d+$/.test(e)).map(Number).filter((pid) => pid !== process.pid);
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

/**
 * A log file that keeps the first and the last `limit / 2` bytes of what is written to it: a
 * command that floods its output must not fill the disk (16 runs at once, each for its whole
 * timeout). The head is written as it arrives; the tail is held in memory until `close`.
 */
class CappedLog {
  bytes = 0;
  truncatedBytes = 0;
  private readonly file: WriteStream;
  private readonly headLimit: number;
  private readonly tailLimit: number;
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;

  constructor(file: string, limit: number) {
    this.file = createWriteStream(file);
    this.file.on('error', () => undefined); // a log that cannot be written does not end the run
    this.headLimit = Math.ceil(limit / 2);
    this.tailLimit = limit - this.headLimit;
  }

  write(chunk: Buffer): void {
    this.bytes += chunk.length;
    const toHead = Math.min(chunk.length, this.headLimit - this.headBytes);
    if (toHead > 0) {
      this.file.write(chunk.subarray(0, toHead));
      this.headBytes += toHead;
    }
    if (toHead === chunk.length) return;
    this.tail.push(chunk.subarray(toHead));
    this.tailBytes += chunk.length - toHead;
    while (this.tail.length > 1 && this.tailBytes - (this.tail[0] as Buffer).length >= this.tailLimit) {
      this.tailBytes -= (this.tail.shift() as Buffer).length;
    }
  }

  close(done: () => void): void {
    const tail = Buffer.concat(this.tail);
    const kept = tail.subarray(Math.max(0, tail.length - this.tailLimit));
    this.truncatedBytes = this.bytes - this.headBytes - kept.length;
    if (this.truncatedBytes > 0) {
      this.file.write(`\n[rein: ${this.truncatedBytes} bytes cut here; this log keeps the first ${this.headBytes} and the last ${kept.length} bytes]\n`);
    }
    this.file.end(kept, done);
  }
}
