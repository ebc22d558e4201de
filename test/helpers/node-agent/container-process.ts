import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import os from 'node:os';

/**
 * One run of a container as a local process: its own process group (the container's processes
 * die together), its stdout and stderr kept as the container's log, line by line with the time
 * each line came, and its end as a container runtime reports it.
 */
export interface LogLine {
  time: Date;
  stream: 'stdout' | 'stderr';
  /** The line, with its newline unless the container ended without one. */
  text: string;
}

export interface ContainerExit {
  /** As a container runtime reports it: a signal's death is 128 + the signal's number. */
  exitCode: number;
  signal?: NodeJS.Signals;
  finishedAt: Date;
}

export class ContainerProcess {
  readonly containerId = `rein-node://${randomUUID()}`;
  readonly startedAt = new Date();
  readonly log: LogLine[] = [];
  exit: ContainerExit | undefined;
  /** Resolves once the process has exited and its output is all in `log`. */
  readonly done: Promise<ContainerExit>;
  private readonly child: ChildProcess;
  private readonly followers = new Set<(line: LogLine | undefined) => void>();

  constructor(argv: string[], env: Record<string, string>, cwd: string) {
    const [file, ...args] = argv;
    this.child = spawn(file as string, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    running.add(this.child);
    const streams = [this.collect('stdout'), this.collect('stderr')];
    this.done = new Promise((resolve) => {
      const finish = (exitCode: number, signal?: NodeJS.Signals) => {
        running.delete(this.child);
        void Promise.all(streams).then(() => {
          this.exit = { exitCode, ...(signal && { signal }), finishedAt: new Date() };
          for (const follower of this.followers) follower(undefined);
          this.followers.clear();
          resolve(this.exit);
        });
      };
      this.child.once('exit', (code, signal) =>
        finish(code ?? 128 + (signal ? os.constants.signals[signal] : 0), signal ?? undefined),
      );
      // A command that is not there: as runc reports it, exit 127 (the message goes to the log).
      this.child.once('error', (err) => {
        this.append('stderr', `exec ${file}: ${err.message}\n`);
        finish(127);
      });
    });
  }

  /** Signals every process of the container. */
  kill(signal: NodeJS.Signals): void {
    if (this.exit || this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      // already gone
    }
  }

  /** Calls `onLine` with each line that comes from now on, then with undefined when the container has ended. */
  follow(onLine: (line: LogLine | undefined) => void): () => void {
    if (this.exit) {
      onLine(undefined);
      return () => {};
    }
    this.followers.add(onLine);
    return () => this.followers.delete(onLine);
  }

  private collect(stream: 'stdout' | 'stderr'): Promise<void> {
    const source = this.child[stream];
    let partial = '';
    return new Promise((resolve) => {
      if (!source) return resolve();
      source.setEncoding('utf8');
      source.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() as string;
        for (const line of lines) this.append(stream, `${line}\n`);
      });
      source.once('close', () => {
        if (partial) this.append(stream, partial);
        resolve();
      });
    });
  }

  private append(stream: 'stdout' | 'stderr', text: string): void {
    const line = { time: new Date(), stream, text };
    this.log.push(line);
    for (const follower of this.followers) follower(line);
  }
}

const MAX_MESSAGE_BYTES = 4096;
const FALLBACK_LOG_LINES = 80;
const FALLBACK_LOG_BYTES = 2048;

/**
 * The container's termination message as the kubelet makes it: the file at its
 * terminationMessagePath (at most 4096 bytes), else with FallbackToLogsOnError and a failed
 * container, the end of its log (80 lines, 2048 bytes).
 */
export function terminationMessage(
  run: ContainerProcess,
  messageFile: string,
  policy: string | undefined,
): string | undefined {
  if (existsSync(messageFile) && statSync(messageFile).size > 0) {
    return readFileSync(messageFile).subarray(0, MAX_MESSAGE_BYTES).toString('utf8');
  }
  if (policy === 'FallbackToLogsOnError' && run.exit && run.exit.exitCode !== 0) {
    const tail = run.log
      .slice(-FALLBACK_LOG_LINES)
      .map((l) => l.text)
      .join('');
    const bytes = Buffer.from(tail);
    return bytes.subarray(Math.max(0, bytes.length - FALLBACK_LOG_BYTES)).toString('utf8');
  }
  return undefined;
}

/** Containers still running when the test process exits die with it. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});
