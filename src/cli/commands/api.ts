import type { Command } from 'commander';
import { startApi } from '../../api/server.js';
import { connectTemporal } from '../../client/temporal.js';
import { adminKeyHash } from '../../gateway/from-config.js';
import { cliContext, temporalUiUrl, untilInterrupted, type GlobalOptions } from '../context.js';

export function registerApiCommand(program: Command): void {
  program
    .command('api')
    .description("serve Rein's HTTP API (runs, schedules, policies; OpenAPI at /openapi.json) against the configured Temporal server")
    .action(async () => {
      const { config } = cliContext(program.opts<GlobalOptions>());
      const temporal = await connectTemporal(config.temporal);
      try {
        const key = adminKeyHash(config.gateway, process.env);
        const ui = temporalUiUrl(config);
        const api = await startApi({ config, client: temporal.client, keyHash: key.hash, ...(ui && { temporalUiUrl: ui }) }, config.api);
        process.stdout.write(`HTTP API ready at ${api.url} (OpenAPI at ${api.url}/openapi.json; console at ${api.url}/console/)\nKey: the gateway admin key (${key.source})\nPress Ctrl-C to stop.\n`);
        await untilInterrupted();
        await api.close();
      } finally {
        await temporal.close();
      }
    });
}
