import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';

export interface CommandSpec {
  command: string;
  args: string[];
  cwd?: string | undefined;
  /** The whole environment of the child: nothing is inherited that is not listed here. */
  env: Record<string, string>;
  timeoutMs: number;
  stdin?: string;
  /** stdout and stderr are written here as they arrive. */
  logFile: string;
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
  seconds: number;
}

const STDOUT_LIMIT = 1024 * 1024;
const TAIL = 2000;
/** Between SIGTERM and SIGKILL on timeout or cancellation. */
const GRACE_MS = 2000;

/**
 * Runs a command in its own process group, so a timeout or a cancellation ends everything it
 * started (a harness's tool subprocesses included), and never rejects: every way it can end is
 * in the result.
 */
export function runCommand(spec: CommandSpec): Promise<CommandResult> {
  const started = performance.now();
  return new Promise((resolve) => {
    const log = createWriteStream(spec.logFile);
    let stdout = '';
    let stderrTail = '';
    let timedOut = false;
    let cancelled = false;
    let spawnError: string | null = null;
    const child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
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
    const stop = () => {
      killGroup('SIGTERM');
      setTimeout(() => killGroup('SIGKILL'), GRACE_MS).unref();
    };
    const timer = setTimeout(() => {
      timedOut = true;
      stop();
    }, spec.timeoutMs);
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
    child.on('close', (exitCode, killedBy) => {
      clearTimeout(timer);
      spec.signal?.removeEventListener('abort', onAbort);
      // Whatever the child left running in its group goes with it.
      killGroup('SIGKILL');
      log.end(() =>
        resolve({ exitCode, killedBy, timedOut, cancelled, spawnError, stdout: stdout.slice(0, STDOUT_LIMIT), stderrTail, seconds: (performance.now() - started) / 1000 }),
      );
    });
  });
}
