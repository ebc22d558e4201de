import type { Client } from '@temporalio/client';
import cliProgress from 'cli-progress';
import { describeRun, type RunReport, type StageActivity } from '../client/runs.js';
import { discordantPairs, mcnemarExactP } from '../gate/paired-tests.js';
import type { RunStatus } from '../../workflows/index.js';
import { formatTable } from './table.js';

export interface FollowOptions {
  out: NodeJS.WritableStream & { isTTY?: boolean };
  intervalMs?: number;
  /** Stops following (the run goes on). */
  signal?: AbortSignal;
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
};

/**
 * Follows a run until it ends (or the signal aborts): a line per stage and per finished
 * iteration, and a progress bar for the running activity on a terminal (a line per quarter
 * elsewhere, so logs stay short). Returns the last report.
 */
export async function followRun(client: Client, runId: string, options: FollowOptions): Promise<RunReport> {
  const { out } = options;
  const say = (line: string) => out.write(`${line}\n`);
  const tty = out.isTTY === true;
  let bar: cliProgress.SingleBar | undefined;
  let barKey = '';
  let lastStage = '';
  let iterationsSeen = 0;
  let baseShown = false;
  let quarterShown = -1;
  const stopBar = () => {
    bar?.stop();
    bar = undefined;
    barKey = '';
  };
  for (;;) {
    const report = await describeRun(client, runId);
    const status = report.status;
    if (status) {
      for (const it of status.iterations.filter((i) => i.iteration > iterationsSeen)) {
        stopBar();
        say(iterationLine(it));
      }
      iterationsSeen = Math.max(iterationsSeen, ...status.iterations.map((i) => i.iteration));
      if (status.heldout && !baseShown) {
        stopBar();
        say(`held-out ${status.heldout.base.policyVersion}: mean reward ${reward(status.heldout.base.meanReward)}`);
        baseShown = true;
      }
    }
    const activity = report.activity;
    const stage = stageLabel(status, activity);
    if (stage && stage !== lastStage) {
      stopBar();
      say(`${new Date().toISOString().slice(11, 19)}  ${STAGE_NAMES[stage] ?? stage}`);
      lastStage = stage;
      quarterShown = -1;
    }
    if (activity?.total !== undefined && activity.done !== undefined) {
      if (tty) {
        const key = `${activity.workflowId}/${activity.type}/${activity.stage ?? ''}`;
        if (key !== barKey) {
          stopBar();
          bar = new cliProgress.SingleBar({ format: '  {bar} {value}/{total} rollouts {note}', hideCursor: true, stream: out as NodeJS.WriteStream }, cliProgress.Presets.shades_classic);
          bar.start(activity.total, activity.done, { note: '' });
          barKey = key;
        }
        bar?.update(activity.done, { note: activity.attempt > 1 ? `(attempt ${activity.attempt}: ${activity.lastFailure ?? ''})` : '' });
      } else {
        const quarter = Math.floor((4 * activity.done) / activity.total);
        if (quarter > quarterShown && quarter > 0 && quarter < 4) {
          say(`  ${activity.done}/${activity.total} rollouts`);
          quarterShown = quarter;
        }
      }
    }
    if (report.execution !== 'RUNNING') {
      stopBar();
      return report;
    }
    if (options.signal?.aborted) {
      stopBar();
      return report;
    }
    await new Promise<void>((resolve) => {
      // One wait per poll: the abort listener goes with it, or a long run piles them up.
      const stop = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        options.signal?.removeEventListener('abort', stop);
        resolve();
      }, options.intervalMs ?? 1000);
      options.signal?.addEventListener('abort', stop, { once: true });
    });
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
  return `iteration ${it.iteration}: ${it.candidate ?? '-'}  train mean reward ${reward(it.meanReward)}, held-out ${reward(it.heldoutMeanReward)}${it.gate ? `; gate ${gateLabel(it.gate)}` : ''}`;
}

function gateLabel(gate: NonNullable<RunStatus['iterations'][number]['gate']>): string {
  if (gate.verdict === 'fail') return `FAIL against ${gate.incumbent} (${gate.reasons.join(' ')}) — \`rein decision ${gate.decisionId}\``;
  return gate.promoted ? `pass, promoted over ${gate.incumbent}` : `pass against ${gate.incumbent} (not promoted: gate.autoPromote is off)`;
}

const reward = (value: number | null | undefined) => (value === null || value === undefined ? '-' : value.toFixed(3));

/** The final table: each iteration, then the base and the final candidate on the same held-out tasks. */
export function formatRunSummary(report: RunReport): string {
  const lines: string[] = [];
  const status = report.status;
  lines.push(`run ${report.runId}: ${status?.state ?? report.execution.toLowerCase()}${report.problem ? ` (${report.problem})` : ''}`);
  if (!status) return `${lines.join('\n')}\n`;
  if (status.iterations.length > 0) {
    const verdict = (it: RunStatus['iterations'][number]) => (it.gate ? `${it.gate.verdict}${it.gate.promoted ? ', promoted' : ''}` : '-');
    const rows = status.iterations.map((it) => [String(it.iteration), it.candidate ?? (it.failed ? `failed: ${it.failed}` : '-'), reward(it.meanReward), reward(it.heldoutMeanReward), verdict(it)]);
    lines.push('', formatTable(['iteration', 'policy', 'train reward', 'held-out reward', 'gate'], rows));
  }
  const heldout = status.heldout;
  if (heldout?.latest) {
    const { base, latest } = heldout;
    const tasks = Object.keys(base.meanRewardByTask).length;
    const success = (byTask: Record<string, number>) => Object.values(byTask).filter((r) => r > 0).length / Math.max(1, Object.keys(byTask).length);
    const { gained, lost } = discordantPairs(base.meanRewardByTask, latest.meanRewardByTask);
    const percent = (x: number) => `${(100 * x).toFixed(1)}%`;
    const row = (label: string, r: typeof base) => [label, r.policyVersion, percent(success(r.meanRewardByTask)), reward(r.meanReward)];
    lines.push('', formatTable([`held-out, ${tasks} tasks`, 'policy', 'success', 'mean reward'], [row('base', base), row('final', latest)]));
    lines.push(`${gained.length} tasks gained, ${lost.length} lost (paired by task); exact McNemar p = ${mcnemarExactP(gained.length, lost.length).toExponential(1)}`);
  }
  return `${lines.join('\n')}\n`;
}
