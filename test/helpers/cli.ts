import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { reinCommand } from '../../src/package-root.js';

const root = path.resolve(import.meta.dirname, '../..');
// Tests load Rein from its sources, so this runs the CLI from the same sources (through tsx).
const rein = reinCommand();

export interface CliOptions {
  cwd?: string;
  /** Added to this process's environment; an undefined value removes the variable. */
  env?: Record<string, string | undefined>;
  /**
   * How to run `rein` (default: as these tests' sources or dist/ say, reinCommand): another Node.js, another copy of
   * the package.
   */
  rein?: { command: string; args: string[] };
}

function spawnRein(args: string[], options: CliOptions): ChildProcess {
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env };
  for (const [key, value] of Object.entries(options.env ?? {})) if (value === undefined) delete env[key];
  const { command, args: before } = options.rein ?? rein;
  return spawn(command, [...before, ...args], {
    cwd: options.cwd ?? root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Runs the `rein` CLI as a user would (a real child process) and collects its output. */
export async function runRein(
  args: string[],
  options: CliOptions = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawnRein(args, options);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  return { code, stdout, stderr };
}

export interface RunningRein {
  /** The `rein` process itself (it runs as node, not under a shell). */
  pid: number | undefined;
  /** What it printed, and the signal that ended it, if one did. */
  output(): { stdout: string; stderr: string; signal: NodeJS.Signals | null };
  /** Resolves once stdout matches, rejects if the process exits first or the wait times out. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Sends the signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

/** Starts a long-running `rein` command (dev, server, worker). */
export function startRein(args: string[], options: CliOptions = {}): RunningRein {
  const child = spawnRein(args, options);
  let stdout = '';
  let stderr = '';
  const listeners = new Set<() => void>();
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString();
    listeners.forEach((l) => l());
  });
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  let signal: NodeJS.Signals | null = null;
  const exited = new Promise<number | null>((resolve) =>
    child.once('close', (code, by) => {
      signal = by;
      resolve(code);
    }),
  );
  return {
    pid: child.pid,
    output: () => ({ stdout, stderr, signal }),
    exited,
    waitFor(pattern, timeoutMs = 90_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (pattern.test(stdout)) done(() => resolve());
        };
        const timer = setTimeout(
          () =>
            done(() =>
              reject(new Error(`timed out waiting for ${String(pattern)}\nstdout:\n${stdout}\nstderr:\n${stderr}`)),
            ),
          timeoutMs,
        );
        const done = (fn: () => void) => {
          clearTimeout(timer);
          listeners.delete(check);
          fn();
        };
        listeners.add(check);
        void exited.then((code) =>
          done(() =>
            reject(
              new Error(
                `exited with ${String(code)} before ${String(pattern)}\nstdout:\n${stdout}\nstderr:\n${stderr}`,
              ),
            ),
          ),
        );
        check();
      });
    },
    async stop(signal = 'SIGINT') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
