import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { DEFAULT_REDACTION_RULES, redactionRules, type RedactionRule } from '../gateway/redact.js';
import { CappedLog } from './capped-log.js';
import { RedactingLog } from './redacting-log.js';
import { killMarked, killProcessGroup, RUN_TOKEN_VAR } from './marked-processes.js';

export interface CommandSpec {
  command: string;
  args: string[];
  cwd?: string | undefined;
  /**
   * The whole environment of the child: nothing is inherited that is not listed here, except
   * `REIN_RUN_TOKEN`, which marks the run's processes (see `killMarked` in marked-processes.ts).
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
  /**
   * The rules the log is redacted by as it is written (the gateway's, as `{name, regex}` so a launcher process can
   * take them); default: the built-in rules.
   */
  redaction?: ReadonlyArray<{ name: string; regex: string }>;
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

/** Runs a command to its end: runCommand here, or the same in a worker's process launcher (launcher.ts). */
export type CommandRunner = (spec: CommandSpec) => Promise<CommandResult>;

const STDOUT_LIMIT = 1024 * 1024;
const TAIL = 2000;
const LOG_LIMIT = 8 * 1024 * 1024;
/** Between SIGTERM and SIGKILL on timeout or cancellation. */
const GRACE_MS = 2000;
/** How long output is still read after the command exits, from descendants that hold its pipes. */
const DRAIN_MS = 1500;

/** How a run ended, as far as it is known when it finishes. */
interface RunEnding {
  timedOut: boolean;
  cancelled: boolean;
  spawnError: string | null;
  exited: { code: number | null; signal: NodeJS.Signals | null } | null;
}

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
    const output = new CommandOutput(new RedactingLog(log, compiledRules(spec.redaction)), log);
    const ending: RunEnding = { timedOut: false, cancelled: false, spawnError: null, exited: null };
    let finished = false;
    const timers: NodeJS.Timeout[] = [];
    const child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: { ...spec.env, [RUN_TOKEN_VAR]: token },
      detached: true,
      stdio: [spec.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });

    const finish = () => {
      if (finished) return;
      finished = true;
      for (const t of timers) clearTimeout(t);
      spec.signal?.removeEventListener('abort', onAbort);
      // A descendant may still hold the pipes; the run no longer waits for it.
      child.stdout?.destroy();
      child.stderr?.destroy();
      child.stdin?.destroy();
      killProcessGroup(child, 'SIGKILL');
      void killMarked(token).then(() => output.close(() => resolve(resultOf(ending, output, started))));
    };
    const stop = () => {
      killProcessGroup(child, 'SIGTERM');
      timers.push(setTimeout(() => killProcessGroup(child, 'SIGKILL'), GRACE_MS));
      // Even a command that cannot be killed (stuck in the kernel) does not hold the run.
      timers.push(setTimeout(finish, GRACE_MS + DRAIN_MS + 1000));
    };
    timers.push(
      setTimeout(() => {
        ending.timedOut = true;
        stop();
      }, spec.timeoutMs),
    );
    const onAbort = () => {
      ending.cancelled = true;
      stop();
    };
    spec.signal?.addEventListener('abort', onAbort, { once: true });
    if (spec.signal?.aborted) onAbort();

    if (spec.stdin !== undefined) {
      child.stdin?.on('error', () => undefined); // a child that exits without reading its input
      child.stdin?.end(spec.stdin);
    }
    output.follow(child);
    child.on('error', (err) => {
      ending.spawnError = `${spec.command}: ${err.message}`;
    });
    child.on('exit', (code, signal) => {
      ending.exited = { code, signal };
      timers.push(setTimeout(finish, DRAIN_MS));
    });
    // All pipes closed after the exit (or the command never started): nothing left to drain.
    child.on('close', finish);
  });
}

function resultOf(ending: RunEnding, output: CommandOutput, started: number): CommandResult {
  return {
    exitCode: ending.exited?.code ?? null,
    killedBy: ending.exited?.signal ?? null,
    timedOut: ending.timedOut,
    cancelled: ending.cancelled,
    spawnError: ending.spawnError,
    stdout: output.stdout.slice(0, STDOUT_LIMIT),
    stderrTail: output.stderrTail,
    logBytes: output.log.bytes,
    logTruncatedBytes: output.log.truncatedBytes,
    seconds: (performance.now() - started) / 1000,
  };
}

/** What a command prints: all of it to the log file, stdout (up to 1 MiB) and the end of stderr kept for the result. */
class CommandOutput {
  stdout = '';
  stderrTail = '';

  constructor(
    /** What the output is written through (redaction) to `log`. */
    private readonly writer: RedactingLog,
    readonly log: CappedLog,
  ) {}

  follow(child: ChildProcess): void {
    child.stdout?.on('data', (chunk: Buffer) => {
      this.writer.write(chunk);
      if (this.stdout.length < STDOUT_LIMIT) this.stdout += chunk.toString('utf8');
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      this.writer.write(chunk);
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-TAIL);
    });
  }

  close(done: () => void): void {
    this.writer.close(done);
  }
}

/** The rules a spec names, compiled once per distinct list (a worker runs thousands of commands with one). */
const compiled = new Map<string, RedactionRule[]>();
function compiledRules(rules: CommandSpec['redaction']): readonly RedactionRule[] {
  if (!rules) return DEFAULT_REDACTION_RULES;
  const key = JSON.stringify(rules);
  let found = compiled.get(key);
  if (!found) {
    if (compiled.size > 16) compiled.clear();
    found = redactionRules([...rules], false);
    compiled.set(key, found);
  }
  return found;
}
