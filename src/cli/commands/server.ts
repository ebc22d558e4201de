import type { Command } from 'commander';
import type { ReinConfig } from '../../config/schema.js';
import { cliContext, devServerHelp, untilInterrupted, type GlobalOptions } from '../context.js';
import { bringUpTemporal } from '../temporal-up.js';

export function registerServerCommand(program: Command, settings: ReinConfig): void {
  program
    .command('server')
    .description(
      `start the embedded Temporal dev server ${devServerHelp(settings)}, its state in the data directory; ` +
        `with TEMPORAL_ADDRESS (temporal.address) set, only check that server and register search attributes${settings.temporal.address ? ` (set now: ${settings.temporal.address})` : ''}`,
    )
    .action(async () => {
      const { config, logger } = cliContext(program.opts<GlobalOptions>());
      const interrupted = untilInterrupted();
      const up = await bringUpTemporal(config, logger);
      if (!up.devServer) {
        process.stdout.write(
          `Using Temporal at ${config.temporal.address} (namespace ${config.temporal.namespace}); nothing to start.\n`,
        );
        await up.shutdown();
        return;
      }
      const server = up.devServer;
      process.stdout.write(
        `Temporal dev server ready at ${server.address} (namespace ${config.temporal.namespace})\n` +
          (server.uiUrl ? `Web UI: ${server.uiUrl}\n` : '') +
          `State: ${config.temporal.devServer.dbFile}\nLog: ${server.logFile}\nPress Ctrl-C to stop.\n`,
      );
      const outcome = await Promise.race([interrupted, server.exited.then((code) => ({ code }))]);
      if (typeof outcome === 'object') {
        throw new Error(
          `the Temporal dev server exited unexpectedly (code ${String(outcome.code)}); see ${server.logFile}`,
        );
      }
      await up.shutdown();
    });
}
