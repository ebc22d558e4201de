import type { Client } from '@temporalio/client';
import cliProgress from 'cli-progress';
import { describeRun, isTemporalUnreachable, type RunReport, type StageActivity } from '../client/runs.js';
import { discordantPairs, mcnemarExactP } from '../gate/paired-tests.js';
import type { RunStatus } from '../../workflows/index.js';
import { formatTable } from '../text-table.js';

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

const STAGE_NAMES: Record<string, string> = {
  'heldout-base': 'held-out replay of the starting policy',
  rollouts: 'training rollouts',
  batch: 'building the batch',
  update: 'policy update',
  heldout: 'held-out replay of the candidate',
  'release-replay': 'held-out replay of the candidate and of production',
  gate: 'release gate',
  promote: 'promotion',
  'heldout-production': 'held-out replay of production',
};

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
  const say = (line: string) => out.write(`${line}\n`);
  const notice = (line: string) => (options.err ?? process.stderr).write(`${line}\n`);
  const tty = out.isTTY === true;
  let bar: cliProgress.SingleBar | undefined;
  let barKey = '';
  let lastStage = '';
  let iterationsSeen = 0;
  let baseShown = false;
  let quarterShown = -1;
  let lastWaiting: string | undefined;
  let lastRetrying: string | undefined;
  // The running activity's progress as last shown: a poll rarely sees the last rollout, so a stage
  // that moved on is shown at its total.
  let shown: { done: number; total: number } | undefined;
  const stopBar = (finished = false) => {
    if (finished && shown) {
      if (bar) bar.update(shown.total);
      else if (!tty) say(`  ${shown.total}/${shown.total} rollouts`);
    }
    shown = undefined;
    bar?.stop();
    bar = undefined;
    barKey = '';
  };
  let lastReport: RunReport | undefined;
  const stopped = () => {
    stopBar();
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
      stopBar();
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
    const status = report.status;
    if (status) {
      for (const it of status.iterations.filter((i) => i.iteration > iterationsSeen)) {
        stopBar(!it.failed);
        say(iterationLine(it));
      }
      iterationsSeen = Math.max(iterationsSeen, ...status.iterations.map((i) => i.iteration));
      if (status.heldout && !baseShown) {
        stopBar(true);
        const { base } = status.heldout;
        say(`held-out ${base.policyVersion}: mean reward ${reward(base.meanReward)}${base.byFailureClass ? `; failed rollouts: ${classes(base.byFailureClass)}` : ''}`);
        baseShown = true;
      }
    }
    const activity = report.activity;
    const stage = stageLabel(status, activity);
    if (stage && stage !== lastStage) {
      stopBar(true);
      say(`${new Date().toISOString().slice(11, 19)}  ${STAGE_NAMES[stage] ?? stage}`);
      lastStage = stage;
      quarterShown = -1;
    }
    // A stage that keeps failing (a full disk, a dead backend) says why while Temporal retries it.
    const retrying = activity && activity.attempt > 1 && activity.lastFailure ? `  attempt ${activity.attempt - 1} of ${activity.type} failed: ${activity.lastFailure}; retrying` : undefined;
    if (retrying && retrying !== lastRetrying) {
      stopBar();
      say(retrying);
    }
    lastRetrying = retrying;
    if (activity?.waiting !== lastWaiting) {
      if (activity?.waiting) {
        stopBar();
        say(`  waiting: ${activity.waiting}`);
      }
      lastWaiting = activity?.waiting;
    }
    if (activity?.total !== undefined && activity.done !== undefined) {
      if (tty) {
        const key = `${activity.workflowId}/${activity.type}/${activity.stage ?? ''}`;
        if (key !== barKey) {
          stopBar(barKey !== '');
          bar = new cliProgress.SingleBar({ format: '  {bar} {value}/{total} rollouts {note}', hideCursor: true, stream: out as NodeJS.WriteStream }, cliProgress.Presets.shades_classic);
          bar.start(activity.total, activity.done, { note: '' });
          barKey = key;
        }
        bar?.update(activity.done, { note: activity.attempt > 1 ? `(attempt ${activity.attempt})` : '' });
        shown = { done: activity.done, total: activity.total };
      } else {
        shown = { done: activity.done, total: activity.total };
        const quarter = Math.floor((4 * activity.done) / activity.total);
        if (quarter > quarterShown && quarter > 0 && quarter < 4) {
          say(`  ${activity.done}/${activity.total} rollouts`);
          quarterShown = quarter;
        }
      }
    }
    if (report.execution !== 'RUNNING') {
      stopBar(report.execution === 'COMPLETED');
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
    const report = await followRun(client, runId, { out: process.stdout, err: process.stderr, signal: stop.signal, address: options.address, ...(options.reconnectForMs !== undefined && { reconnectForMs: options.reconnectForMs }) });
    process.stdout.write(`\n${formatRunSummary(report)}`);
    return report.execution === 'COMPLETED' ? 0 : 1;
  } catch (err) {
    if (err instanceof StoppedFollowing && abandonedFor !== undefined) {
      process.stderr.write(`rein: ${abandonedFor}; the run is durable: start \`rein dev\` (or \`rein worker\`) and it goes on\n`);
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

function stageLabel(status: RunStatus | undefined, activity: StageActivity | undefined): string | undefined {
  if (!status) return undefined;
  if (status.stage === 'heldout-base' || status.stage === 'paused' || status.stage === 'done') return status.stage;
  // Between activities an iteration has nothing to show; keep the last line rather than print a bare one.
  const inner = activity?.stage ? STAGE_NAMES[activity.stage] : undefined;
  return inner ? `${status.stage}: ${inner}` : undefined;
}

function iterationLine(it: RunStatus['iterations'][number]): string {
  if (it.failed) return `iteration ${it.iteration}: failed (${it.failed})`;
  const failures = it.failures && Object.keys(it.failures).length > 0 ? `; failed rollouts: ${failuresByStage(it.failures)}` : '';
  return `iteration ${it.iteration}: ${it.candidate ?? '-'}  train mean reward ${reward(it.meanReward)}, held-out ${reward(it.heldoutMeanReward)}${failures}${it.gate ? `; gate ${gateLabel(it.gate)}` : ''}`;
}

/** "harness 2, infrastructure 1": failed rollouts by failure class, most first. */
export function classes(byClass: Record<string, number>): string {
  return Object.entries(byClass)
    .sort(([a, x], [b, y]) => y - x || a.localeCompare(b))
    .map(([name, n]) => `${name} ${n}`)
    .join(', ');
}

/** "training rollouts harness 2; held-out replay of the candidate harness 1": failed rollouts by class per stage. */
export function failuresByStage(byStage: Record<string, Record<string, number>>): string {
  return Object.entries(byStage)
    .map(([stage, byClass]) => `${STAGE_NAMES[stage] ?? stage} ${classes(byClass)}`)
    .join('; ');
}

function gateLabel(gate: NonNullable<RunStatus['iterations'][number]['gate']>): string {
  if (gate.verdict === 'insufficient') return `INSUFFICIENT EVIDENCE against ${gate.incumbent}, not promoted (${gate.reasons.join(' ')}) — \`rein decision ${gate.decisionId}\``;
  if (gate.verdict === 'fail') return `FAIL against ${gate.incumbent} (${gate.reasons.join(' ')}) — \`rein decision ${gate.decisionId}\``;
  return gate.promoted ? `pass, promoted over ${gate.incumbent}` : `pass against ${gate.incumbent} (not promoted: gate.autoPromote is off)`;
}

const reward = (value: number | null | undefined) => (value === null || value === undefined ? '-' : value.toFixed(3));

/** The final table: each iteration, then the base and the final candidate on the same held-out tasks. */
export function formatRunSummary(report: RunReport): string {
  const lines: string[] = [];
  const status = report.status;
  // The run's own state is the last it reported; a run that failed or was ended did not report that.
  const ended = ['FAILED', 'TERMINATED', 'CANCELLED', 'TIMED_OUT'].includes(report.execution);
  lines.push(`run ${report.runId}: ${ended ? report.execution.toLowerCase().replace('_', ' ') : (status?.state ?? report.execution.toLowerCase())}${report.problem ? ` (${report.problem})` : ''}`);
  const lastResume = report.resumes.at(-1);
  if (lastResume) {
    const times = report.resumes.length === 1 ? 'once' : `${report.resumes.length} times`;
    lines.push(`continued ${times}; last from iteration ${lastResume.fromIteration} with ${lastResume.policyVersion} after it ${lastResume.previousStatus.toLowerCase().replace('_', ' ')} (${lastResume.reason}) at ${lastResume.at}`);
  }
  if (ended) lines.push(`\`rein resume ${report.runId}\` continues it from its first unfinished iteration.`);
  if (!status) return `${lines.join('\n')}\n`;
  if (status.iterations.length > 0) {
    const verdict = (it: RunStatus['iterations'][number]) => (it.gate ? `${it.gate.verdict}${it.gate.promoted ? ', promoted' : ''}` : '-');
    const failed = (it: RunStatus['iterations'][number]) => (it.failures && Object.keys(it.failures).length > 0 ? failuresByStage(it.failures) : '-');
    const rows = status.iterations.map((it) => [String(it.iteration), it.candidate ?? (it.failed ? `failed: ${it.failed}` : '-'), reward(it.meanReward), reward(it.heldoutMeanReward), verdict(it), failed(it)]);
    lines.push('', formatTable(['iteration', 'policy', 'train reward', 'held-out reward', 'gate', 'failed rollouts'], rows));
  }
  const heldout = status.heldout;
  if (heldout?.latest) {
    const { base, latest } = heldout;
    // "final" is what production serves; runs from before the run kept it know it only when the last candidate was promoted.
    const lastGate = status.iterations.filter((i) => i.gate).at(-1)?.gate;
    const production = heldout.production ?? (lastGate?.promoted && lastGate && status.iterations.at(-1)?.candidate === latest.policyVersion ? latest : undefined);
    const final = production ?? latest;
    // Only tasks scored in both replays are compared; a task a fault cost one side is set aside.
    const tasks = Object.keys(base.meanRewardByTask).filter((t) => t in final.meanRewardByTask);
    const setAside = new Set([...Object.keys(base.meanRewardByTask), ...Object.keys(final.meanRewardByTask)]).size - tasks.length;
    const byTask = (r: typeof base) => Object.fromEntries(tasks.map((t) => [t, r.meanRewardByTask[t] as number]));
    const success = (r: typeof base) => tasks.filter((t) => ((r.meanRewardByTask[t] ?? 0) as number) > 0).length / Math.max(1, tasks.length);
    const { gained, lost } = discordantPairs(byTask(base), byTask(final));
    const percent = (x: number) => `${(100 * x).toFixed(1)}%`;
    const row = (label: string, r: typeof base, note: string) => [label, r.policyVersion, percent(success(r)), reward(r.meanReward), r.byFailureClass ? classes(r.byFailureClass) : '-', note];
    const candidateGate = status.iterations.find((i) => i.candidate === latest.policyVersion)?.gate;
    const rows = [row('base', base, 'starting policy')];
    if (production) rows.push(row('final', production, 'production'));
    if (production?.policyVersion !== latest.policyVersion) rows.push(row('last candidate', latest, candidateGate ? `not promoted (gate ${candidateGate.verdict})` : 'not promoted'));
    lines.push('', formatTable([`held-out, ${tasks.length} tasks`, 'policy', 'success', 'mean reward', 'failed rollouts', ''], rows));
    lines.push(`${final.policyVersion} against ${base.policyVersion}: ${gained.length} tasks gained, ${lost.length} lost (paired by task); exact McNemar p = ${mcnemarExactP(gained.length, lost.length).toExponential(1)}`);
    if (setAside > 0) lines.push(`${setAside} held-out tasks set aside: not scored in one of the replays (lost to a fault, not failed by a policy)`);
  }
  return `${lines.join('\n')}\n`;
}
