import { z } from 'zod';

const port = z.number().int().min(1).max(65535);

const tlsFiles = z.strictObject({
  clientCertPath: z.string().optional().describe('PEM client certificate for mTLS (relative to the config file)'),
  clientKeyPath: z.string().optional().describe('PEM private key of the client certificate'),
  serverCaCertPath: z.string().optional().describe('PEM CA bundle that signs the server certificate'),
  serverName: z.string().optional().describe('Override of the server name checked against the certificate'),
});

const devServer = z.strictObject({
  ip: z.string().default('localhost').describe('Address the embedded dev server and its Web UI bind to'),
  port: port.default(7233).describe('gRPC port of the embedded dev server'),
  uiPort: port.default(8233).describe('Port of the Temporal Web UI'),
  headless: z.boolean().default(false).describe('Run without the Web UI'),
  dbFile: z
    .string()
    .default('temporal/dev.sqlite')
    .describe('SQLite file of the dev server, relative to dataDir; workflow history survives restarts'),
  logLevel: z.enum(['debug', 'info', 'warn', 'error']).default('warn').describe('Log level of the dev server'),
});

const temporal = z.strictObject({
  address: z
    .string()
    .min(1)
    .optional()
    .describe('host:port of an existing Temporal server or cluster; when set, Rein starts no dev server (env TEMPORAL_ADDRESS)'),
  namespace: z.string().min(1).default('default').describe('Temporal namespace (env TEMPORAL_NAMESPACE)'),
  taskQueue: z.string().min(1).default('rein').describe('Task queue the Rein workers poll'),
  apiKey: z.string().min(1).optional().describe('API key, e.g. for Temporal Cloud (env TEMPORAL_API_KEY)'),
  tls: z
    .union([z.boolean(), tlsFiles])
    .optional()
    .describe('true for server-authenticated TLS, or certificate files for mTLS (env TEMPORAL_TLS*)'),
  devServer: devServer.prefault({}).describe('The embedded dev server Rein starts when no address is set'),
});

export const reinConfigSchema = z
  .strictObject({
    $schema: z.string().optional().describe('JSON Schema reference, for editors; ignored by Rein'),
    dataDir: z
      .string()
      .min(1)
      .default('.rein')
      .describe("Rein's data directory (traces, artifacts, dev server state), relative to the config file"),
    log: z
      .strictObject({
        level: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
      })
      .prefault({}),
    temporal: temporal.prefault({}),
  })
  .describe('Rein configuration');

export type ReinConfig = z.output<typeof reinConfigSchema>;
export type TemporalSettings = ReinConfig['temporal'];
export type DevServerSettings = TemporalSettings['devServer'];

/** The JSON Schema of the config file, as `rein config schema` prints it. */
export function configJsonSchema(): object {
  return z.toJSONSchema(reinConfigSchema, { io: 'input' });
}
