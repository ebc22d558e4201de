import type { Client } from '@temporalio/client';
import { describeRun, isTemporalUnreachable, type RunReport } from '../client/runs.js';
import { formatRunSummary } from './run-format.js';
import { terminalWidth } from './terminal-width.js';
import { RunProgress } from './run-progress.js';

export { formatRunSummary };

export interface FollowOptions {
  out: NodeJS.WritableStream & { isTTY?: boolean };
  /** Where notices about the connection go; default: stderr. */
  err?: NodeJS.WritableStream;
  intervalMs?: number;
  /** Stops following (the run goes on): followRun rejects with StoppedFollowing at once. */
  signal?: AbortSignal;
  /** host:port of Temporal, for the notices. */
  address?: string;
  /** How long Temporal may stay unreachable before following gives up (default 10 minutes). */
  reconnectForMs?: number;
  /** Waits between tries while Temporal is unreachable: doubling from the first, up to the longest. */
  retryDelayMs?: { first: number; longest: number };
  /** Reads the run; tests stand in for Temporal here. */
  describe?: (client: Client, runId: string) => Promise<RunReport>;
}

export const DEFAULT_RECONNECT_FOR_MS = 10 * 60_000;

/** Following stopped on request; the run was not touched. */
export class StoppedFollowing extends Error {
  constructor(readonly lastReport: RunReport | undefined) {
    super('stopped following');
  }
}

/** Temporal did not answer for longer than the follower waits; the run itself may well go on. */
export class TemporalUnreachableError extends Error {
  constructor(
    readonly address: string,
    readonly silentMs: number,
    options: { cause: unknown },
  ) {
    super(`Temporal at ${address} has not answered for ${Math.round(silentMs / 1000)} s`, options);
  }
}

/**
 * Follows a run until it ends: a line per stage and per finished iteration, and a progress bar
 * for the running activity on a terminal (a line per quarter elsewhere, so logs stay short).
 * Returns the last report. While Temporal is unreachable it says so and tries again, for up to
 * reconnectForMs (then TemporalUnreachableError); the signal stops it at once (StoppedFollowing).
 */
export async function followRun(client: Client, runId: string, options: FollowOptions): Promise<RunReport> {
  const { out, signal } = options;
  const describe = options.describe ?? describeRun;
  const address = options.address ?? 'the configured address';
  const reconnectForMs = options.reconnectForMs ?? DEFAULT_RECONNECT_FOR_MS;
  const { first, longest } = options.retryDelayMs ?? { first: 1000, longest: 15_000 };
  const notice = (line: string) => (options.err ?? process.stderr).write(`${line}\n`);
  const progress = new RunProgress(out);
  let lastReport: RunReport | undefined;
  const stopped = () => {
    progress.stopBar();
    return new StoppedFollowing(lastReport);
  };
  let answeredAt = Date.now();
  let failedTries = 0;
  for (;;) {
    let answer: RunReport | typeof ABORTED;
    try {
      answer = await unlessAborted(describe(client, runId), signal);
    } catch (err) {
      if (!isTemporalUnreachable(err)) throw err;
      progress.stopBar();
      const silentMs = Date.now() - answeredAt;
      if (silentMs >= reconnectForMs) throw new TemporalUnreachableError(address, silentMs, { cause: err });
      failedTries++;
      notice(`Temporal at ${address} is unreachable; retrying (attempt ${failedTries})…`);
      if (!(await pause(Math.min(longest, first * 2 ** (failedTries - 1)), signal))) throw stopped();
      continue;
    }
    if (answer === ABORTED) throw stopped();
    const report = answer;
    if (failedTries > 0) notice(`Temporal at ${address} answers again; following run ${runId}.`);
    failedTries = 0;
    answeredAt = Date.now();
    lastReport = report;
    progress.show(report);
    if (report.execution !== 'RUNNING') {
      progress.stopBar(report.execution === 'COMPLETED');
      return report;
    }
    if (!(await pause(options.intervalMs ?? 1000, signal))) throw stopped();
  }
}

const ABORTED = Symbol('aborted');

/**
 * The call's outcome, or ABORTED as soon as the signal aborts: a call to an unreachable server
 * can take many seconds to fail, and a follower must stop when asked.
 */
async function unlessAborted<T>(call: Promise<T>, signal: AbortSignal | undefined): Promise<T | typeof ABORTED> {
  if (!signal) return call;
  let onAbort = () => {};
  const aborted = new Promise<typeof ABORTED>((resolve) => {
    onAbort = () => resolve(ABORTED);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([call, aborted]);
  } finally {
    // The abandoned call may still fail later: nobody waits for it any more.
    call.catch(() => undefined);
    signal.removeEventListener('abort', onAbort);
  }
}

/** Waits; false when the signal aborted the wait. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    // One wait per poll: the abort listener goes with it, or a long run piles them up.
    const stop = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', stop);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', stop, { once: true });
  });
}

/** Exit codes of a followed run beyond 0 (it completed) and 1 (it failed). */
export const EXIT_INTERRUPTED: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };
/** Temporal stayed unreachable (or this process's own services stopped): the run may well go on. */
export const EXIT_TEMPORAL_UNREACHABLE = 75;

/** An AbortSignal that SIGINT and SIGTERM abort (the reason is the signal's name), until disposed. */
export function abortOnInterrupt(): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onSignal = (name: NodeJS.Signals) => controller.abort(name);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

export interface FollowToEndOptions {
  /** Aborted by SIGINT or SIGTERM (see abortOnInterrupt): stop following, leave the run alone. */
  signal: AbortSignal;
  address: string;
  reconnectForMs?: number;
  /** What becomes of the run once nobody follows it, and how to follow it again. */
  afterStop: string;
  /** Resolves with a reason when following cannot go on (services this process runs have stopped). */
  abandoned?: Promise<string>;
}

/**
 * Follows a run for a command and prints how it ended. Returns the exit code: 0 the run
 * completed, 1 the run itself failed, 130/143 following was interrupted, EXIT_TEMPORAL_UNREACHABLE
 * Temporal did not answer for too long (the run was not touched in any case).
 */
export async function followToEnd(client: Client, runId: string, options: FollowToEndOptions): Promise<number> {
  const stop = new AbortController();
  const interrupt = () => stop.abort(options.signal.reason);
  if (options.signal.aborted) interrupt();
  else options.signal.addEventListener('abort', interrupt, { once: true });
  let abandonedFor: string | undefined;
  void options.abandoned?.then((reason) => {
    abandonedFor = reason;
    stop.abort('abandoned');
  });
  try {
    const report = await followRun(client, runId, {
      out: process.stdout,
      err: process.stderr,
      signal: stop.signal,
      address: options.address,
      ...(options.reconnectForMs !== undefined && { reconnectForMs: options.reconnectForMs }),
    });
    process.stdout.write(`\n${formatRunSummary(report, terminalWidth())}`);
    return report.execution === 'COMPLETED' ? 0 : 1;
  } catch (err) {
    if (err instanceof StoppedFollowing && abandonedFor !== undefined) {
      process.stderr.write(
        `rein: ${abandonedFor}; the run is durable: start \`rein dev\` (or \`rein worker\`) and it goes on\n`,
      );
      return EXIT_TEMPORAL_UNREACHABLE;
    }
    if (err instanceof StoppedFollowing) {
      process.stdout.write(`Stopped following; ${options.afterStop}\n`);
      return EXIT_INTERRUPTED[String(options.signal.reason)] ?? 130;
    }
    if (err instanceof TemporalUnreachableError) {
      process.stderr.write(
        `rein: ${err.message}; stopped following. This says nothing about run ${runId}: it may well still be going. ` +
          `Follow it again with \`rein status ${runId} --follow\` once Temporal answers.\n`,
      );
      return EXIT_TEMPORAL_UNREACHABLE;
    }
    throw err;
  } finally {
    options.signal.removeEventListener('abort', interrupt);
  }
}
