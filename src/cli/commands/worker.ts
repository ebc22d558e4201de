import type { Command } from 'commander';
import type { ReinConfig } from '../../config/schema.js';
import { cliContext, listenAddress, temporalAddress, untilInterrupted, type GlobalOptions } from '../context.js';
import { startLocalWorker } from '../local-worker.js';

export function registerWorkerCommand(program: Command, settings: ReinConfig): void {
  program
    .command('worker')
    .description(
      `run a Rein worker (workflows and activities) against the Temporal server at ${temporalAddress(settings)}` +
        (settings.worker.metricsPort === undefined
          ? ''
          : `, with Prometheus metrics on ${listenAddress(settings.worker.metricsHost, settings.worker.metricsPort)}`),
    )
    .action(async () => {
      const { config, logger } = cliContext(program.opts<GlobalOptions>());
      const interrupted = untilInterrupted();
      const running = await startLocalWorker(config, logger);
      process.stdout.write(
        `Worker polling task queue ${config.temporal.taskQueue} on ${temporalAddress(config)} (namespace ${config.temporal.namespace}).${running.metricsUrl ? ` Metrics at ${running.metricsUrl}.` : ''} Press Ctrl-C to stop.\n`,
      );
      await Promise.race([interrupted, running.done]);
      await running.stop();
    });
}
