import { InvalidArgumentError, type Command } from 'commander';
import {
  newRunId,
  promotionGuard,
  RUN_ID_PATTERN,
  RUN_ID_RULE,
  startRun,
  trainingRunInput,
  type RunOverrides,
} from '../../client/runs.js';
import { cliContext, temporalUiUrl, workflowUrl, type GlobalOptions } from '../context.js';
import { checkPaths, TASK_SET_KEYS } from '../../config/paths.js';
import { temporalConnectionOptions } from '../../config/temporal-connection.js';
import { abortOnInterrupt, followToEnd } from '../follow-run.js';
import { connectOrStartServices } from '../connect-services.js';
import { PRODUCTION_ALIAS } from '../../registry/promotion.js';
import { withRegistry } from '../../registry/open.js';
import { storeLocation } from '../../store/location.js';

/** An option's value as an integer of at least `min`, else commander's usage error naming what was expected. */
const integerFrom = (min: number, expected: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`expected ${expected}, got "${value}".`);
  return n;
};

export const positiveInteger = integerFrom(1, 'a positive integer');
export const nonNegativeInteger = integerFrom(0, '0 or a positive integer');

interface RunSizeOptions {
  iterations?: number;
  tasks?: number;
  samples?: number;
  heldout?: number;
}

interface TrainOptions extends RunSizeOptions {
  runId?: string;
  follow?: boolean;
  reconnectTimeout: number;
}

/** `--reconnect-timeout`, for every command that follows a run. */
export function addFollowOptions(command: Command): Command {
  return command.option(
    '--reconnect-timeout <seconds>',
    'while following, how long Temporal may stay unreachable before rein stops following (the run is not touched)',
    positiveInteger,
    600,
  );
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
  return {
    iterations: options.iterations,
    tasksPerIteration: options.tasks,
    samplesPerTask: options.samples,
    heldoutLimit: options.heldout,
  };
}

export function registerTrainCommand(program: Command): void {
  const train = program
    .command('train')
    .description(
      "start a training run (the trainingRun workflow) from the config's harness, verifier and run section; " +
        'with no worker polling, runs Temporal, the gateway, the policy server and a worker in this process until the run ends',
    )
    .option(
      '--run-id <id>',
      `name of the run (its workflow id; ${RUN_ID_RULE}); default run-<time>-<random>`,
      (id: string) => {
        if (!RUN_ID_PATTERN.test(id))
          throw new InvalidArgumentError(
            `${JSON.stringify(id)} is not a run id: use ${RUN_ID_RULE} (it names the run's policy versions and rollouts)`,
          );
        return id;
      },
    )
    .option('--follow', 'show progress per stage until the run ends, then a final table');
  addRunSizeOptions(addFollowOptions(train)).action(async (options: TrainOptions, command: Command) => {
    const loaded = cliContext(command.optsWithGlobals<GlobalOptions>());
    const { config, file, logger } = loaded;
    checkPaths(loaded, TASK_SET_KEYS);
    const say = (line: string) => process.stdout.write(`${line}\n`);
    const input = {
      ...trainingRunInput(config, runOverrides(options), file ?? 'config'),
      runId: options.runId ?? newRunId(),
    };
    const { taskQueue, namespace } = config.temporal;
    const { client, services, close } = await connectOrStartServices(config, logger, say);
    const interrupted = abortOnInterrupt();
    try {
      const started = await startRun(client, taskQueue, input, config, promotionGuard(config));
      const ui = services?.temporal.uiUrl ?? temporalUiUrl(config);
      // What production serves now: the base until some run's candidate was promoted.
      const production =
        input.startFrom === 'production'
          ? ((await withRegistry(storeLocation(config), (r) => r.alias(PRODUCTION_ALIAS))) ?? input.base.version)
          : undefined;
      say(
        `Run ${input.runId}: ${input.iterations === null ? 'iterations until stopped' : input.iterations === 1 ? '1 iteration' : `${input.iterations} iterations`} of ${input.train.tasksPerIteration} tasks × ${input.train.samplesPerTask} samples from ${production ? `production (${production} now)` : input.base.version}` +
          (input.heldout
            ? `; held-out replay of ${input.heldout.taskIds.length} tasks with the starting policy and ${input.heldoutEvery && input.heldoutEvery > 1 ? `after every ${input.heldoutEvery} iterations and the last` : 'each candidate'}`
            : ''),
      );
      if (ui) say(`Web UI: ${workflowUrl(ui, namespace, input.runId, started.executionRunId)}`);
      if (!options.follow && !services) {
        say(`Follow it with \`rein status ${input.runId}\` (or \`rein train --follow\` next time).`);
        return;
      }
      process.exitCode = await followToEnd(client, input.runId, {
        signal: interrupted.signal,
        address: temporalConnectionOptions(config.temporal).address,
        reconnectForMs: options.reconnectTimeout * 1000,
        afterStop: services
          ? `run ${input.runId} waits for a worker: \`rein dev\` picks it up where it was (then \`rein status ${input.runId} --follow\`); \`rein stop ${input.runId}\` ends it.`
          : `run ${input.runId} goes on: \`rein status ${input.runId} --follow\` follows it again, \`rein stop ${input.runId}\` ends it.`,
        ...(services && { abandoned: services.failed }),
      });
    } finally {
      interrupted.dispose();
      await close();
    }
  });
}
