import {
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  type ScheduleOverlapPolicy,
  type Client,
  type ScheduleSpec,
} from '@temporalio/client';
import type { ReinConfig } from '../config/schema.js';
import type { TrainingRunInput } from '../../workflows/index.js';
import { storeConfigOfStart } from './run-config.js';
import { ScheduleError } from './schedule-error.js';

/** The overlap policies as the CLI and API spell them. */
export const OVERLAP_POLICIES = [
  'skip',
  'buffer-one',
  'buffer-all',
  'cancel-other',
  'terminate-other',
  'allow-all',
] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];

export interface ScheduleRequest {
  scheduleId: string;
  /** Exactly one: an interval such as `1d`, `6h`, `30m`, or a cron expression. */
  every?: string | undefined;
  cron?: string | undefined;
  /** What a fire does while the previous run still goes on (default skip). */
  overlap?: OverlapPolicy | undefined;
  paused?: boolean | undefined;
  note?: string | undefined;
  /** Each fire starts a run with this input; its run id is the schedule id and the fire time. */
  input: Omit<TrainingRunInput, 'runId'>;
  /** The config the input was built from: stored in the artifact store, for workers to load by its hash. */
  config: ReinConfig;
  /** What its runs promote into (promotionMemo), so that a run started by hand meanwhile is refused. */
  promotes?: string | undefined;
}

export interface ScheduleListing {
  scheduleId: string;
  paused: boolean;
  note: string | undefined;
  spec: string;
  nextRuns: Date[];
  recentRuns: Array<{ runId: string; startedAt: Date }>;
}

/**
 * Recurring training: a Temporal Schedule whose action starts a trainingRun. The config the input
 * was built from is stored first: every run the schedule starts names it by its hash.
 */
export async function createSchedule(client: Client, taskQueue: string, request: ScheduleRequest): Promise<void> {
  if ((request.every === undefined) === (request.cron === undefined))
    throw new ScheduleError('give exactly one of --every (e.g. 1d, 6h) and --cron (e.g. "0 3 * * *")');
  await storeConfigOfStart(request.config, request.input.configHash);
  const spec: ScheduleSpec =
    request.every !== undefined
      ? { intervals: [{ every: durationOf(request.every) }] }
      : { cronExpressions: [request.cron as string] };
  try {
    await client.schedule.create({
      scheduleId: request.scheduleId,
      spec,
      action: {
        type: 'startWorkflow',
        workflowType: 'trainingRun',
        taskQueue,
        workflowId: request.scheduleId,
        args: [request.input],
        memo: { configHash: request.input.configHash, ...(request.promotes && { promotes: request.promotes }) },
      },
      policies: { overlap: overlapPolicy(request.overlap ?? 'skip'), catchupWindow: '1 hour' },
      state: { paused: request.paused ?? false, ...(request.note && { note: request.note }) },
      // What the operator wrote, to list it as written (Temporal stores cron as calendar specs).
      memo: {
        configHash: request.input.configHash,
        when:
          request.every !== undefined
            ? `every ${formatDuration(durationOf(request.every))}`
            : `cron ${request.cron as string}`,
      },
    });
  } catch (err) {
    if (err instanceof ScheduleAlreadyRunning)
      throw new ScheduleError(
        `a schedule named ${request.scheduleId} already exists; \`rein schedule delete ${request.scheduleId}\` first, or choose another name`,
      );
    throw new ScheduleError(`Temporal refused the schedule: ${(err as Error).message}`);
  }
}

export async function listSchedules(client: Client): Promise<ScheduleListing[]> {
  const listings: ScheduleListing[] = [];
  for await (const summary of client.schedule.list()) {
    if (summary.action?.type !== 'startWorkflow' || summary.action.workflowType !== 'trainingRun') continue;
    const spec = summary.spec;
    const when = summary.memo?.when;
    listings.push({
      scheduleId: summary.scheduleId,
      paused: summary.state.paused,
      note: summary.state.note,
      spec:
        typeof when === 'string'
          ? when
          : [
              ...(spec?.intervals ?? []).map((i) => `every ${formatDuration(Number(i.every))}`),
              ...(spec?.calendars ?? []).map(() => 'calendar'),
            ].join(', ') || '-',
      nextRuns: summary.info.nextActionTimes,
      recentRuns: summary.info.recentActions.flatMap((a) =>
        a.action.type === 'startWorkflow' ? [{ runId: a.action.workflow.workflowId, startedAt: a.takenAt }] : [],
      ),
    });
  }
  return listings.sort((a, b) => a.scheduleId.localeCompare(b.scheduleId));
}

export async function changeSchedule(
  client: Client,
  scheduleId: string,
  change: 'pause' | 'unpause' | 'trigger' | 'delete',
  note?: string,
): Promise<void> {
  const handle = client.schedule.getHandle(scheduleId);
  try {
    if (change === 'pause') await handle.pause(note);
    else if (change === 'unpause') await handle.unpause(note);
    // The SDK's trigger ignores the schedule's overlap policy unless told it (it allows all).
    else if (change === 'trigger') await handle.trigger((await handle.describe()).policies.overlap);
    else await handle.delete();
  } catch (err) {
    if (err instanceof ScheduleNotFoundError)
      throw new ScheduleError(`no schedule named ${scheduleId}; \`rein schedule list\` lists them`);
    throw err;
  }
}

/** `1d`, `6h`, `30m`, `45s`, `1h30m` → milliseconds. */
export function durationOf(text: string): number {
  const match = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(text.trim());
  const [, d = '0', h = '0', m = '0', s = '0'] = match ?? [];
  const ms = ((Number(d) * 24 + Number(h)) * 60 + Number(m)) * 60_000 + Number(s) * 1000;
  if (!match || ms === 0)
    throw new ScheduleError(`--every "${text}" is not a duration; expected e.g. 1d, 6h, 30m or 1h30m`);
  return ms;
}

function formatDuration(ms: number): string {
  const parts: string[] = [];
  let rest = Math.round(ms / 1000);
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3600],
    ['m', 60],
    ['s', 1],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join('') || '0s';
}

function overlapPolicy(policy: OverlapPolicy): ScheduleOverlapPolicy {
  return policy.toUpperCase().replace(/-/g, '_') as ScheduleOverlapPolicy;
}
