/**
 * The process launcher: a small Node process a worker starts once (see launcher.ts) that spawns
 * and follows the harness and verifier runs for it. Fork copies the spawning process's page
 * tables, so a spawn from a worker of 300–450 MB costs ~10 ms of its CPU; from this process
 * (~50 MB) about 1 ms. It takes run and cancel requests over its IPC channel and answers each run
 * with runCommand's result. When the channel closes (the worker exits or dies), it stops every
 * run it follows, and everything those started, and exits: a lost worker leaves no harness behind.
 */
import { runCommand, type CommandResult, type CommandSpec } from './process.js';

/** What the worker sends: a command to run (its spec less the signal), or a cancel of one. */
export type LauncherRequest =
  { type: 'run'; id: number; spec: Omit<CommandSpec, 'signal'> } | { type: 'cancel'; id: number };

export interface LauncherReply {
  id: number;
  result: CommandResult;
}

/** After the worker has gone: runs get SIGTERM, then SIGKILL 2 s later; this is the last moment to exit. */
const EXIT_DEADLINE_MS = 8000;

const running = new Map<number, AbortController>();

function run(id: number, spec: Omit<CommandSpec, 'signal'>): void {
  const abort = new AbortController();
  running.set(id, abort);
  void runCommand({ ...spec, signal: abort.signal }).then((result) => {
    running.delete(id);
    // A worker that went away meanwhile gets no answer (the callback takes the send's error).
    if (process.connected)
      process.send?.({ id, result } satisfies LauncherReply, undefined, undefined, () => undefined);
    else if (running.size === 0) process.exit(0);
  });
}

process.on('message', (request: LauncherRequest) => {
  if (request.type === 'cancel') running.get(request.id)?.abort();
  else run(request.id, request.spec);
});

process.on('disconnect', () => {
  if (running.size === 0) process.exit(0);
  for (const abort of running.values()) abort.abort();
  setTimeout(() => process.exit(0), EXIT_DEADLINE_MS).unref();
});
