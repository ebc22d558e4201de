import type { Client } from '@temporalio/client';
import { Option, type Command } from 'commander';
import {
  cancelRun,
  continueRun,
  describeRun,
  listRuns,
  RUN_EXECUTIONS,
  runExecutionStatus,
  signalRun,
  type RunContinuation,
  type RunListFilter,
} from '../../client/runs.js';
import { describePolicies, policiesTable } from '../policy-status.js';
import { withRegistry } from '../../registry/open.js';
import { storeLocation } from '../../store/location.js';
import { temporalConnectionOptions } from '../../config/temporal-connection.js';
import { cliContext, temporalUiUrl, withClient, workflowUrl, type GlobalOptions } from '../context.js';
import { abortOnInterrupt, followToEnd, formatRunSummary } from '../follow-run.js';
import { pipelineLine } from '../run-format.js';
import { connectOrStartServices } from '../connect-services.js';
import { formatTable } from '../../text-table.js';
import { terminalWidth } from '../terminal-width.js';
import { addFollowOptions, nonNegativeInteger, positiveInteger } from './train.js';

/** What `rein resume` says when it continues a closed run. */
export function continuationLine(c: RunContinuation): string {
  const verb =
    { FAILED: 'failed', TERMINATED: 'was terminated', TIMED_OUT: 'timed out', CANCELLED: 'was cancelled' }[
      c.previousStatus
    ] ?? `ended (${c.previousStatus.toLowerCase()})`;
  const where =
    c.endedInIteration !== undefined
      ? ` in iteration ${c.endedInIteration}`
      : c.startOver
        ? ' before its first iteration'
        : c.fromIteration > 1
          ? ` after iteration ${c.fromIteration - 1}`
          : '';
  const of = c.iterations === null ? '' : ` of ${c.iterations}`;
  const what = c.startOver
    ? `starting it over from ${c.policyVersion}: the base's registration and held-out replay run again (finished rollouts are reused)`
    : `continuing from iteration ${c.fromIteration}${of} with policy ${c.policyVersion}`;
  return `run ${c.runId} ${verb}${where} (${c.reason}); ${what}.`;
}

const time = (d: Date | undefined) => (d ? d.toISOString().slice(0, 16).replace('T', ' ') : '-');

/** `rein runs`, `rein status RUN`, `rein pause|stop|cancel|resume RUN`, `rein policies`. */
export function registerRunCommands(program: Command): void {
  addRunsCommand(program);
  addStatusCommand(program);
  addPauseAndStopCommands(program);
  addCancelCommand(program);
  addResumeCommand(program);
  addPoliciesCommand(program);
}

/** `rein runs` */
function addRunsCommand(program: Command): void {
  program
    .command('runs')
    .description('list training runs, newest first')
    .option('--limit <n>', 'how many', positiveInteger, 20)
    .option('--offset <n>', 'skip this many of the newest first (the next page)', nonNegativeInteger, 0)
    .addOption(
      new Option('--execution <status>', 'only runs in this Temporal execution status').choices(RUN_EXECUTIONS),
    )
    .option('--search <text>', 'only runs whose id holds this text (any case)')
    .option('--json', 'print JSON')
    .action(async (options: RunListFilter & { json?: boolean }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const { items: runs } = await withClient(config, (client) => listRuns(client, options));
      if (options.json) return void process.stdout.write(`${JSON.stringify(runs, null, 2)}\n`);
      const rows = runs.map((r) => [
        r.runId,
        r.execution.toLowerCase(),
        r.stage ?? '-',
        r.policyVersion ?? '-',
        time(r.startTime),
        time(r.closeTime),
      ]);
      process.stdout.write(
        `${formatTable(['run', 'execution', 'stage', 'policy', 'started', 'closed'], rows, { width: terminalWidth(), dropFirst: [5, 3, 2], more: 'see --json' })}\n${runs.length === 0 ? '(no runs yet: `rein train --config FILE` starts one)\n' : ''}`,
      );
    });
}

/** `rein status RUN` */
function addStatusCommand(program: Command): void {
  const statusCommand = program
    .command('status')
    .description("a run's state, stage, iterations and held-out comparison")
    .argument('<run>', 'run id')
    .option('--json', 'print JSON')
    .option('--follow', 'show progress per stage until the run ends, then the final table (as `rein train --follow`)');
  addFollowOptions(statusCommand).action(
    async (
      runId: string,
      options: { json?: boolean; follow?: boolean; reconnectTimeout: number },
      command: Command,
    ) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      if (options.follow) {
        const interrupted = abortOnInterrupt();
        try {
          process.exitCode = await withClient(config, (client) =>
            followToEnd(client, runId, {
              signal: interrupted.signal,
              address: temporalConnectionOptions(config.temporal).address,
              reconnectForMs: options.reconnectTimeout * 1000,
              afterStop: `run ${runId} goes on: \`rein status ${runId} --follow\` follows it again, \`rein stop ${runId}\` ends it.`,
            }),
          );
        } finally {
          interrupted.dispose();
        }
        return;
      }
      const report = await withClient(config, (client) => describeRun(client, runId));
      // A script can tell a run that did not complete (failed, cancelled, terminated, timed out) by the exit code.
      if (report.execution !== 'RUNNING' && report.execution !== 'COMPLETED') process.exitCode = 1;
      if (options.json) return void process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      const activity = report.activity;
      process.stdout.write(
        formatRunSummary(report, terminalWidth()) +
          (report.status && report.execution === 'RUNNING'
            ? `stage: ${report.status.stage}${activity ? ` (${activity.stage ?? activity.type}${activity.total !== undefined ? ` ${activity.done ?? 0}/${activity.total}` : ''}${activity.attempt > 1 ? `, attempt ${activity.attempt}` : ''})` : ''}\n`
            : '') +
          (report.status && report.execution === 'RUNNING' && pipelineLine(report.status)
            ? `${pipelineLine(report.status)}\n`
            : '') +
          (activity?.waiting ? `waiting: ${activity.waiting}\n` : '') +
          (activity && activity.attempt > 1 && activity.lastFailure
            ? `attempt ${activity.attempt - 1} failed: ${activity.lastFailure}\n`
            : ''),
      );
    },
  );
}

/** `rein pause RUN`, `rein stop RUN`: signals the run acts on at its next iteration boundary */
function addPauseAndStopCommands(program: Command): void {
  for (const [signal, description] of [
    ['pause', 'pause a run between iterations'],
    ['stop', 'stop a run after its current iteration'],
  ] as const) {
    program
      .command(signal)
      .description(description)
      .argument('<run>', 'run id')
      .action(async (runId: string, _options: unknown, command: Command) => {
        const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
        await withClient(config, (client) => signalRun(client, runId, signal));
        process.stdout.write(`${signal} sent to run ${runId}\n`);
      });
  }
}

/** `rein cancel RUN` */
function addCancelCommand(program: Command): void {
  program
    .command('cancel')
    .description(
      'cancel a run now: its running stage is cancelled (rollouts, the update) and the run ends cancelled; `rein stop` ends it after the current iteration instead',
    )
    .argument('<run>', 'run id')
    .action(async (runId: string, _options: unknown, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const outcome = await withClient(config, (client) => cancelRun(client, runId, config.temporal.taskQueue));
      process.stdout.write(
        outcome === 'cancelled'
          ? `run ${runId} cancelled\n`
          : `cancel requested for run ${runId}; no worker polls task queue "${config.temporal.taskQueue}", so it ends when one picks the run up (\`rein dev\` or \`rein worker\`)\n`,
      );
    });
}

/** `rein resume RUN`: a paused run is signalled, a closed one continued as a new execution */
function addResumeCommand(program: Command): void {
  const resumeCommand = program
    .command('resume')
    .description(
      'resume a paused run (the resume signal), or continue a run that failed, was terminated or timed out from its first unfinished iteration ' +
        '(a new execution under the same run id; with no worker polling, runs the services in this process until the run ends)',
    )
    .argument('<run>', 'run id')
    .option('--follow', 'show progress per stage until the run ends, then the final table (as `rein status --follow`)');
  addFollowOptions(resumeCommand).action(
    async (runId: string, options: { follow?: boolean; reconnectTimeout: number }, command: Command) => {
      const { config, logger } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const say = (line: string) => process.stdout.write(`${line}\n`);
      const follow = (client: Client, abandoned?: Promise<string>, waitsForWorker = false) => {
        const interrupted = abortOnInterrupt();
        return followToEnd(client, runId, {
          signal: interrupted.signal,
          address: temporalConnectionOptions(config.temporal).address,
          reconnectForMs: options.reconnectTimeout * 1000,
          afterStop: waitsForWorker
            ? `run ${runId} waits for a worker: \`rein dev\` picks it up where it was (then \`rein status ${runId} --follow\`); \`rein stop ${runId}\` ends it.`
            : `run ${runId} goes on: \`rein status ${runId} --follow\` follows it again, \`rein stop ${runId}\` ends it.`,
          ...(abandoned && { abandoned }),
        }).finally(() => interrupted.dispose());
      };
      const execution = await withClient(config, async (client) => {
        const status = await runExecutionStatus(client, runId);
        if (status === 'RUNNING') {
          await signalRun(client, runId, 'resume');
          say(`resume sent to run ${runId}`);
          if (options.follow) process.exitCode = await follow(client);
        } else if (status === 'COMPLETED') {
          await continueRun(client, runId); // refuses, saying why and what to do instead
        }
        return status;
      });
      if (execution === 'RUNNING' || execution === 'COMPLETED') return;
      // A closed run that did not complete: continued as a new execution, which needs a worker.
      const { client, services, close } = await connectOrStartServices(config, logger, say);
      try {
        const continued = await continueRun(client, runId, {
          allowConcurrentPromotion: config.gate.concurrentRuns === 'allow',
        });
        say(continuationLine(continued));
        const ui = services?.temporal.uiUrl ?? temporalUiUrl(config);
        if (ui) say(`Web UI: ${workflowUrl(ui, config.temporal.namespace, runId, continued.executionRunId)}`);
        if (!options.follow && !services) {
          say(`Follow it with \`rein status ${runId} --follow\`.`);
          return;
        }
        process.exitCode = await follow(client, services?.failed, services !== undefined);
      } finally {
        await close();
      }
    },
  );
}

/** `rein policies` */
function addPoliciesCommand(program: Command): void {
  program
    .command('policies')
    .description(
      'policy versions in the registry: lineage, real status (production, refused by the gate, ...), held-out success at their gate, trainer metrics',
    )
    .option('--run <id>', 'only versions a run trained')
    .option('--wide', 'every column: parent, weights, run, iteration, batch, trainer metrics')
    .option('--json', 'print JSON')
    .action(async (options: { run?: string; wide?: boolean; json?: boolean }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const policies = await withRegistry(storeLocation(config), (registry) =>
        describePolicies(registry, options.run === undefined ? {} : { runId: options.run }),
      );
      if (options.run !== undefined && policies.length === 0)
        throw new Error(
          `run ${options.run} registered no policy version (a run registers one per finished iteration); \`rein runs\` lists the runs`,
        );
      if (options.json) return void process.stdout.write(`${JSON.stringify(policies, null, 2)}\n`);
      process.stdout.write(
        `${policiesTable(policies, options.wide === true, terminalWidth())}\n${policies.length === 0 ? '(no policies registered yet)\n' : ''}`,
      );
    });
}
