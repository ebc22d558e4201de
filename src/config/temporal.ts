import { z } from 'zod';
import { devServerSettings } from '../devserver/config.js';

const tlsFiles = z.strictObject({
  clientCertPath: z.string().optional().describe('PEM client certificate for mTLS (relative to the config file)'),
  clientKeyPath: z.string().optional().describe('PEM private key of the client certificate'),
  serverCaCertPath: z.string().optional().describe('PEM CA bundle that signs the server certificate'),
  serverName: z.string().optional().describe('Override of the server name checked against the certificate'),
});

/** The config's `temporal` section: an existing Temporal server, or the embedded dev server. */
export const temporalSettings = z.strictObject({
  address: z
    .string()
    .min(1)
    .optional()
    .describe(
      'host:port of an existing Temporal server or cluster; when set, Rein starts no dev server (env TEMPORAL_ADDRESS)',
    ),
  namespace: z.string().min(1).default('default').describe('Temporal namespace (env TEMPORAL_NAMESPACE)'),
  taskQueue: z.string().min(1).default('rein').describe('Task queue the Rein workers poll'),
  apiKey: z.string().min(1).optional().describe('API key, e.g. for Temporal Cloud (env TEMPORAL_API_KEY)'),
  tls: z
    .union([z.boolean(), tlsFiles])
    .optional()
    .describe('true for server-authenticated TLS, or certificate files for mTLS (env TEMPORAL_TLS*)'),
  devServer: devServerSettings.prefault({}).describe('The embedded dev server Rein starts when no address is set'),
});
