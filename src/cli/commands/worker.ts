import type { Command } from 'commander';
import { cliContext, untilInterrupted, type GlobalOptions } from '../context.js';
import { startLocalWorker } from '../local-worker.js';

export function registerWorkerCommand(program: Command): void {
  program
    .command('worker')
    .description("run a Rein worker (workflows and activities) against the configured Temporal server")
    .action(async () => {
      const { config, logger } = cliContext(program.opts<GlobalOptions>());
      const running = await startLocalWorker(config, logger);
      process.stdout.write(
        `Worker polling task queue ${config.temporal.taskQueue} on ${config.temporal.address ?? `${config.temporal.devServer.ip}:${config.temporal.devServer.port}`} (namespace ${config.temporal.namespace}).${running.metricsUrl ? ` Metrics at ${running.metricsUrl}.` : ''} Press Ctrl-C to stop.\n`,
      );
      await Promise.race([untilInterrupted(), running.done]);
      await running.stop();
    });
}
