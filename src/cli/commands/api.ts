import type { Command } from 'commander';
import { startApi } from '../../api/server.js';
import { connectTemporal } from '../../client/temporal.js';
import { adminKeyHash } from '../../gateway/from-config.js';
import type { ReinConfig } from '../../config/schema.js';
import {
  cliContext,
  listenAddress,
  temporalAddress,
  temporalUiUrl,
  untilInterrupted,
  type GlobalOptions,
} from '../context.js';

export function registerApiCommand(program: Command, settings: ReinConfig): void {
  program
    .command('api')
    .description(
      `serve Rein's HTTP API (runs, schedules, policies; OpenAPI at /openapi.json) on ${listenAddress(settings.api.host, settings.api.port)} (api.host, api.port), against the Temporal server at ${temporalAddress(settings)}`,
    )
    .action(async () => {
      const { config } = cliContext(program.opts<GlobalOptions>());
      const interrupted = untilInterrupted();
      const temporal = await connectTemporal(config.temporal);
      try {
        const key = adminKeyHash(config.gateway, process.env);
        const ui = temporalUiUrl(config);
        const api = await startApi(
          { config, client: temporal.client, keyHash: key.hash, ...(ui && { temporalUiUrl: ui }) },
          config.api,
        );
        process.stdout.write(
          `HTTP API ready at ${api.url} (OpenAPI at ${api.url}/openapi.json; console at ${api.url}/console/)\nKey: the gateway admin key (${key.source})\nPress Ctrl-C to stop.\n`,
        );
        await interrupted;
        await api.close();
      } finally {
        await temporal.close();
      }
    });
}
