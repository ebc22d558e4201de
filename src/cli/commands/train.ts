import { InvalidArgumentError, type Command } from 'commander';
import { newRunId, startRun, trainingRunInput, type RunOverrides } from '../../client/runs.js';
import { cliContext, temporalUiUrl, workflowUrl, type GlobalOptions } from '../context.js';
import { followRun, formatRunSummary } from '../follow-run.js';
import { connectOrStartServices } from '../services.js';

export const positiveInteger = (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`expected a positive integer, got "${value}".`);
  return n;
};

interface RunSizeOptions {
  iterations?: number;
  tasks?: number;
  samples?: number;
  heldout?: number;
}

interface TrainOptions extends RunSizeOptions {
  runId?: string;
  follow?: boolean;
}

/** The options that override the config's run section (shared by `train` and `schedule create`). */
export function addRunSizeOptions(command: Command): Command {
  return command
    .option('--iterations <n>', 'iterations (overrides run.iterations)', positiveInteger)
    .option('--tasks <n>', 'training tasks per iteration (overrides run.tasksPerIteration)', positiveInteger)
    .option('--samples <n>', 'rollouts per task (overrides run.samplesPerTask)', positiveInteger)
    .option('--heldout <n>', 'replay only the first n held-out tasks (overrides run.heldoutLimit)', positiveInteger);
}

export function runOverrides(options: RunSizeOptions): RunOverrides {
  return { iterations: options.iterations, tasksPerIteration: options.tasks, samplesPerTask: options.samples, heldoutLimit: options.heldout };
}

export function registerTrainCommand(program: Command): void {
  const train = program
    .command('train')
    .description(
      "start a training run (the trainingRun workflow) from the config's harness, verifier and run section; " +
        'with no worker polling, runs Temporal, the gateway, the policy server and a worker in this process until the run ends',
    )
    .option('--run-id <id>', 'name of the run (its workflow id); default run-<time>-<random>')
    .option('--follow', 'show progress per stage until the run ends, then a final table');
  addRunSizeOptions(train).action(async (options: TrainOptions, command: Command) => {
      const { config, file, logger } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const say = (line: string) => process.stdout.write(`${line}\n`);
      const input = {
        ...trainingRunInput(config, runOverrides(options), file ?? 'config'),
        runId: options.runId ?? newRunId(),
      };
      const { taskQueue, namespace } = config.temporal;
      const { client, services, close } = await connectOrStartServices(config, logger, say);
      const interrupted = new AbortController();
      const onSignal = () => interrupted.abort();
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      try {
        const started = await startRun(client, taskQueue, input);
        const ui = services?.temporal.uiUrl ?? temporalUiUrl(config);
        say(`Run ${input.runId}: ${input.iterations === null ? 'iterations until stopped' : input.iterations === 1 ? '1 iteration' : `${input.iterations} iterations`} of ${input.train.tasksPerIteration} tasks × ${input.train.samplesPerTask} samples from ${input.startFrom === 'production' ? `production (${input.base.version} until a promotion)` : input.base.version}` +
          (input.heldout
            ? `; held-out replay of ${input.heldout.taskIds.length} tasks with the starting policy and ${input.heldoutEvery && input.heldoutEvery > 1 ? `after every ${input.heldoutEvery} iterations and the last` : 'each candidate'}`
            : ''));
        if (ui) say(`Web UI: ${workflowUrl(ui, namespace, input.runId, started.executionRunId)}`);
        if (!options.follow && !services) {
          say(`Follow it with \`rein status ${input.runId}\` (or \`rein train --follow\` next time).`);
          return;
        }
        const report = await Promise.race([
          followRun(client, input.runId, { out: process.stdout, signal: interrupted.signal }),
          services?.failed.then((reason) => Promise.reject(new Error(`${reason}; the run is durable: start \`rein dev\` (or \`rein worker\`) and it goes on`))) ?? new Promise<never>(() => {}),
        ]);
        if (interrupted.signal.aborted && report.execution === 'RUNNING') {
          say(services
            ? `Stopped following. Run ${input.runId} waits for a worker: \`rein dev\` picks it up where it was; \`rein stop ${input.runId}\` ends it.`
            : `Stopped following; run ${input.runId} goes on (\`rein status ${input.runId}\`, \`rein stop ${input.runId}\`).`);
          process.exitCode = 130;
          return;
        }
        process.stdout.write(`\n${formatRunSummary(report)}`);
        if (report.execution !== 'COMPLETED') process.exitCode = 1;
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        await close();
      }
    });
}
