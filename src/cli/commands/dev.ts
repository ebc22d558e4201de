import type { Command } from 'commander';
import { usesEmbeddedServer } from '../../config/temporal-connection.js';
import { runPreflight } from '../../client/preflight.js';
import { adminKeyHash } from '../../gateway/from-config.js';
import type { ReinConfig } from '../../config/schema.js';
import { cliContext, devServerHelp, listenAddress, untilInterrupted, type GlobalOptions } from '../context.js';
import { startServices } from '../services.js';
import { formatPreflight } from './doctor.js';

export function registerDevCommand(program: Command, settings: ReinConfig): void {
  program
    .command('dev')
    .description(
      'start everything the embedded default needs, check it, and keep it running: ' +
        `${settings.temporal.address ? `Temporal at ${settings.temporal.address}` : `the Temporal dev server ${devServerHelp(settings)}`}, ` +
        (settings.policyServer.enabled
          ? `the policy server on ${listenAddress(settings.policyServer.host, settings.policyServer.port)}, `
          : '') +
        `the gateway on ${listenAddress(settings.gateway.host, settings.gateway.port)}, a worker, and the HTTP API on ${listenAddress(settings.api.host, settings.api.port)}`,
    )
    .action(async () => {
      const { config, file, logger } = cliContext(program.opts<GlobalOptions>());
      const interrupted = untilInterrupted();
      const services = await startServices(config, logger, { api: true });
      try {
        const { temporal, uiUrl } = services.temporal;
        const run = await runPreflight(temporal.client, config.temporal.taskQueue);
        process.stdout.write(formatPreflight(run, config.temporal.namespace, uiUrl));
        if (!run.result.ok) throw new Error('preflight failed; see the checks above');
        process.stdout.write(
          [
            `Rein is ready.`,
            `  Config        ${file ?? `none found (no --config, REIN_CONFIG or rein.yaml in ${process.cwd()}): the defaults`}`,
            `  Admin key     ${adminKeyHash(config.gateway, process.env).source} (the gateway's, the API's and the console's)`,
            `  Temporal      ${temporal.connection.options.address}${uiUrl ? ` (Web UI ${uiUrl})` : ''}, worker on task queue "${config.temporal.taskQueue}"`,
            // A dev server already listening there (another `rein dev`, `rein train`) is joined, not started: say so.
            ...(usesEmbeddedServer(config.temporal) && !services.temporal.devServer
              ? [
                  `                joined the Temporal dev server already running there (started by another rein command, with its own database, not ${config.temporal.devServer.dbFile}); it stops when that command does`,
                ]
              : []),
            `  Gateway       ${services.gateway.url} (OpenAI base URL ${services.gateway.url}/v1)`,
            ...(services.api
              ? [
                  `  HTTP API      ${services.api.url} (OpenAPI at ${services.api.url}/openapi.json; key: the gateway admin key)`,
                ]
              : []),
            ...(services.api
              ? [`  Console       ${services.api.url}/console/ (log in with the gateway admin key)`]
              : []),
            ...(services.policyServer
              ? [`  Policy server ${services.policyServer.url} serving ${services.policyServer.models().join(', ')}`]
              : []),
            'Start a run from another terminal: rein train --config FILE --follow. Press Ctrl-C to stop.',
            '',
          ].join('\n'),
        );
        const stopped = await Promise.race([interrupted, services.failed]);
        if (stopped !== 'SIGINT' && stopped !== 'SIGTERM') throw new Error(`${stopped} unexpectedly`);
      } finally {
        await services.shutdown();
      }
    });
}
