import { fork, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { LauncherReply, LauncherRequest } from './launcher-main.js';
import type { CommandResult, CommandSpec } from './process.js';

/** The launcher died with runs in flight: their harnesses are gone with it, and the work is retried. */
export class LauncherLostError extends Error {}

interface PendingRun {
  resolve: (result: CommandResult) => void;
  reject: (err: Error) => void;
  dispose: () => void;
}

/**
 * Runs commands in a small child process (launcher-main.ts) instead of this one: a worker spawns
 * two processes per rollout, and fork's cost grows with the spawning process's memory, so a
 * worker of several hundred MB spent most of its CPU forking. The launcher starts on the first
 * run, and again after it dies (the runs it had in flight reject with LauncherLostError: their
 * processes went with it, so the rollouts' attempts are lost like a worker's). The results are
 * runCommand's, to the field.
 */
export class ProcessLauncher {
  private child: ChildProcess | null = null;
  private readonly pending = new Map<number, PendingRun>();
  private nextId = 1;

  /** A CommandRunner: runs one command in the launcher. */
  readonly run = (spec: CommandSpec): Promise<CommandResult> => {
    const child = this.started();
    const id = this.nextId++;
    const { signal, ...rest } = spec;
    return new Promise<CommandResult>((resolve, reject) => {
      const cancel = () => this.send(child, { type: 'cancel', id });
      signal?.addEventListener('abort', cancel, { once: true });
      const dispose = () => signal?.removeEventListener('abort', cancel);
      this.pending.set(id, { resolve, reject, dispose });
      this.holdOpen();
      this.send(child, { type: 'run', id, spec: rest });
      if (signal?.aborted) cancel();
    });
  };

  /** Closes the channel: the launcher stops what it still runs and exits. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.ref(); // until it has exited
    child.disconnect();
    await exited;
  }

  private started(): ChildProcess {
    if (this.child) return this.child;
    const { entry, execArgv } = launcherEntry();
    const child = fork(entry, [], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'json' });
    child.on('message', (reply: LauncherReply) => this.settle(reply.id, (run) => run.resolve(reply.result)));
    child.on('exit', (code, signal) => {
      this.child = null;
      const error = new LauncherLostError(
        `this worker's process launcher (pid ${child.pid}) exited (${signal ?? `code ${code}`}) with the run in flight; its processes went with it`,
      );
      for (const id of [...this.pending.keys()]) this.settle(id, (run) => run.reject(error));
    });
    child.on('error', () => undefined); // a failed send: its exit settles the runs
    this.child = child;
    return child;
  }

  private send(child: ChildProcess, request: LauncherRequest): void {
    if (child.connected) child.send(request, undefined, undefined, () => undefined);
  }

  private settle(id: number, how: (run: PendingRun) => void): void {
    const run = this.pending.get(id);
    if (!run) return;
    this.pending.delete(id);
    run.dispose();
    how(run);
    this.holdOpen();
  }

  /** The channel keeps this process alive only while runs are in flight. */
  private holdOpen(): void {
    const channel = this.child?.channel;
    if (this.pending.size > 0) {
      this.child?.ref();
      channel?.ref();
    } else {
      this.child?.unref();
      channel?.unref();
    }
  }
}

/** The launcher's module: compiled JavaScript, or (Rein run from its sources) the TypeScript through tsx. */
function launcherEntry(): { entry: string; execArgv: string[] } {
  if (!import.meta.url.endsWith('.ts'))
    return { entry: fileURLToPath(new URL('./launcher-main.js', import.meta.url)), execArgv: [] };
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  return { entry: fileURLToPath(new URL('./launcher-main.ts', import.meta.url)), execArgv: ['--import', tsx] };
}
