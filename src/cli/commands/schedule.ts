import { Option, type Command } from 'commander';
import { promotionGuard, promotionMemo, trainingRunInput } from '../../client/runs.js';
import {
  changeSchedule,
  createSchedule,
  listSchedules,
  OVERLAP_POLICIES,
  type OverlapPolicy,
} from '../../client/schedules.js';
import { checkPaths, TASK_SET_KEYS } from '../../config/paths.js';
import { cliContext, withClient, type GlobalOptions } from '../context.js';
import { formatTable } from '../../text-table.js';
import { addRunSizeOptions, runOverrides } from './train.js';

const time = (d: Date | undefined) => (d ? d.toISOString().slice(0, 16).replace('T', ' ') : '-');

/** `rein schedule create|list|pause|unpause|trigger|delete`: recurring training over Temporal Schedules. */
export function registerScheduleCommands(program: Command): void {
  const schedule = program.command('schedule').description('recurring training runs (Temporal Schedules)');
  addCreateCommand(schedule);
  addListCommand(schedule);
  addChangeCommands(schedule);
}

function addCreateCommand(schedule: Command): void {
  const create = schedule
    .command('create')
    .description(
      "fire a training run from the config's run section on a schedule; a fire while the last run still goes on is skipped by default",
    )
    .argument('<name>', 'schedule id; each run is named <name>-<fire time>')
    .option('--every <duration>', 'an interval: 1d, 6h, 30m, 1h30m')
    .option('--cron <expression>', 'a cron expression, e.g. "0 3 * * *" (UTC)')
    .addOption(
      new Option('--overlap <policy>', 'when a fire finds the previous run still going')
        .choices(OVERLAP_POLICIES)
        .default('skip'),
    )
    .option('--paused', 'create it paused')
    .option('--note <text>', 'why (shown in the list and the Web UI)');
  addRunSizeOptions(create).action(
    async (
      name: string,
      options: {
        every?: string;
        cron?: string;
        overlap: OverlapPolicy;
        paused?: boolean;
        note?: string;
        iterations?: number;
        tasks?: number;
        samples?: number;
        heldout?: number;
      },
      command: Command,
    ) => {
      const loaded = cliContext(command.optsWithGlobals<GlobalOptions>());
      const { config, file } = loaded;
      checkPaths(loaded, TASK_SET_KEYS);
      const input = trainingRunInput(config, runOverrides(options), file ?? 'config');
      await withClient(config, (client) =>
        createSchedule(client, config.temporal.taskQueue, {
          scheduleId: name,
          every: options.every,
          cron: options.cron,
          overlap: options.overlap,
          paused: options.paused,
          note: options.note,
          input,
          config,
          ...promotionMemo(input, promotionGuard(config)),
        }),
      );
      process.stdout.write(
        `schedule ${name} created${options.paused ? ' (paused)' : ''}; \`rein schedule list\` shows its next runs\n`,
      );
    },
  );
}

function addListCommand(schedule: Command): void {
  schedule
    .command('list')
    .description('the training schedules, their next and recent runs')
    .addHelpText(
      'after',
      "\nRead from Temporal's visibility store, which is eventually consistent: a schedule created a moment ago can take a few seconds to show.",
    )
    .option('--json', 'print JSON')
    .action(async (options: { json?: boolean }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const schedules = await withClient(config, (client) => listSchedules(client));
      if (options.json) return void process.stdout.write(`${JSON.stringify(schedules, null, 2)}\n`);
      const rows = schedules.map((s) => [
        s.scheduleId,
        s.paused ? `paused${s.note ? ` (${s.note})` : ''}` : 'active',
        s.spec,
        time(s.nextRuns[0]),
        s.recentRuns.at(-1)?.runId ?? '-',
      ]);
      process.stdout.write(
        `${formatTable(['schedule', 'state', 'when', 'next run', 'last run'], rows)}\n${schedules.length === 0 ? '(no schedules: `rein schedule create NAME --every 1d`)\n' : ''}`,
      );
    });
}

/** pause, unpause, trigger and delete: one change each to a schedule named by id. */
function addChangeCommands(schedule: Command): void {
  for (const [change, description, done] of [
    ['pause', 'stop firing until unpaused', 'paused'],
    ['unpause', 'fire again', 'unpaused'],
    ['trigger', 'start a run now (the overlap policy still applies)', 'triggered'],
    ['delete', 'delete the schedule (runs it started go on)', 'deleted'],
  ] as const) {
    const sub = schedule.command(change).description(description).argument('<name>', 'schedule id');
    if (change === 'pause' || change === 'unpause') sub.option('--note <text>', 'why');
    sub.action(async (name: string, options: { note?: string }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      await withClient(config, (client) => changeSchedule(client, name, change, options.note));
      process.stdout.write(`schedule ${name} ${done}\n`);
    });
  }
}
