import cliProgress from 'cli-progress';
import type { RunReport, StageActivity } from '../client/runs.js';
import type { RunStatus } from '../../workflows/index.js';
import { classes, formatReward, iterationLine, STAGE_NAMES } from './run-format.js';

/**
 * What a followed run shows as its reports come in: a line per stage and per finished iteration,
 * and a progress bar for the running activity on a terminal (a line per quarter elsewhere, so logs
 * stay short). Each line is shown once, however many reports repeat it.
 */
export class RunProgress {
  private readonly tty: boolean;
  private bar: cliProgress.SingleBar | undefined;
  private barKey = '';
  private lastStage = '';
  private iterationsSeen = 0;
  private baseShown = false;
  private quarterShown = -1;
  private lastWaiting: string | undefined;
  private lastRetrying: string | undefined;
  // The running activity's progress as last shown: a poll rarely sees the last rollout, so a stage
  // that moved on is shown at its total.
  private shown: { done: number; total: number } | undefined;

  constructor(private readonly out: NodeJS.WritableStream & { isTTY?: boolean }) {
    this.tty = out.isTTY === true;
  }

  show(report: RunReport): void {
    const status = report.status;
    if (status) this.showResults(status);
    const activity = report.activity;
    this.showStage(stageLabel(status, activity));
    // A stage that keeps failing (a full disk, a dead backend) says why while Temporal retries it.
    const retrying =
      activity && activity.attempt > 1 && activity.lastFailure
        ? `  attempt ${activity.attempt - 1} of ${activity.type} failed: ${activity.lastFailure}; retrying`
        : undefined;
    if (retrying && retrying !== this.lastRetrying) {
      this.stopBar();
      this.say(retrying);
    }
    this.lastRetrying = retrying;
    if (activity?.waiting !== this.lastWaiting) {
      if (activity?.waiting) {
        this.stopBar();
        this.say(`  waiting: ${activity.waiting}`);
      }
      this.lastWaiting = activity?.waiting;
    }
    if (activity?.total !== undefined && activity.done !== undefined)
      this.showActivityProgress(activity, activity.done, activity.total);
  }

  /** Ends the progress bar; `finished` first shows the activity at its total. */
  stopBar(finished = false): void {
    if (finished && this.shown) {
      if (this.bar) this.bar.update(this.shown.total);
      else if (!this.tty) this.say(`  ${this.shown.total}/${this.shown.total} rollouts`);
    }
    this.shown = undefined;
    this.bar?.stop();
    this.bar = undefined;
    this.barKey = '';
  }

  private say(line: string): void {
    this.out.write(`${line}\n`);
  }

  /** Iterations that finished since the last report, and the starting policy's held-out result once. */
  private showResults(status: RunStatus): void {
    for (const it of status.iterations.filter((i) => i.iteration > this.iterationsSeen)) {
      this.stopBar(!it.failed);
      this.say(iterationLine(it));
    }
    this.iterationsSeen = Math.max(this.iterationsSeen, ...status.iterations.map((i) => i.iteration));
    if (status.heldout && !this.baseShown) {
      this.stopBar(true);
      const { base } = status.heldout;
      this.say(
        `held-out ${base.policyVersion}: mean reward ${formatReward(base.meanReward)}${base.byFailureClass ? `; failed rollouts: ${classes(base.byFailureClass)}` : ''}`,
      );
      this.baseShown = true;
    }
  }

  private showStage(stage: string | undefined): void {
    if (stage && stage !== this.lastStage) {
      this.stopBar(true);
      this.say(`${new Date().toISOString().slice(11, 19)}  ${STAGE_NAMES[stage] ?? stage}`);
      this.lastStage = stage;
      this.quarterShown = -1;
    }
  }

  private showActivityProgress(activity: StageActivity, done: number, total: number): void {
    if (this.tty) {
      const key = `${activity.workflowId}/${activity.type}/${activity.stage ?? ''}`;
      if (key !== this.barKey) {
        this.stopBar(this.barKey !== '');
        this.bar = new cliProgress.SingleBar(
          {
            format: '  {bar} {value}/{total} rollouts {note}',
            hideCursor: true,
            stream: this.out as NodeJS.WriteStream,
          },
          cliProgress.Presets.shades_classic,
        );
        this.bar.start(total, done, { note: '' });
        this.barKey = key;
      }
      this.bar?.update(done, { note: activity.attempt > 1 ? `(attempt ${activity.attempt})` : '' });
      this.shown = { done, total };
    } else {
      this.shown = { done, total };
      const quarter = Math.floor((4 * done) / total);
      if (quarter > this.quarterShown && quarter > 0 && quarter < 4) {
        this.say(`  ${done}/${total} rollouts`);
        this.quarterShown = quarter;
      }
    }
  }
}

function stageLabel(status: RunStatus | undefined, activity: StageActivity | undefined): string | undefined {
  if (!status) return undefined;
  if (status.stage === 'heldout-base' || status.stage === 'paused' || status.stage === 'done') return status.stage;
  // Between activities an iteration has nothing to show; keep the last line rather than print a bare one.
  const inner = activity?.stage ? STAGE_NAMES[activity.stage] : undefined;
  return inner ? `${status.stage}: ${inner}` : undefined;
}
