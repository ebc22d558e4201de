import { z } from 'zod';
import { port } from '../port-setting.js';

/** The config's `temporal.devServer`: the Temporal dev server Rein starts when no address is set. */
export const devServerSettings = z.strictObject({
  ip: z.string().default('localhost').describe('Address the embedded dev server and its Web UI bind to'),
  port: port.default(7233).describe('gRPC port of the embedded dev server'),
  uiPort: port.default(8233).describe('Port of the Temporal Web UI'),
  httpPort: port
    .optional()
    .describe(
      "Port of the dev server's HTTP API (default: port + 10, Temporal's 7243); the CLI would pick a random one",
    ),
  metricsPort: port
    .optional()
    .describe("Port of the dev server's Prometheus /metrics (default: port + 11); the CLI would pick a random one"),
  headless: z.boolean().default(false).describe('Run without the Web UI'),
  dbFile: z
    .string()
    .default('temporal/dev.sqlite')
    .describe('SQLite file of the dev server, relative to dataDir; workflow history survives restarts'),
  logLevel: z.enum(['debug', 'info', 'warn', 'error']).default('warn').describe('Log level of the dev server'),
});
